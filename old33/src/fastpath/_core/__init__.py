"""Device/backend choice, op registration, argument checks and allocation shared by all ops."""
