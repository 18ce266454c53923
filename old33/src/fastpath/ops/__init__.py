"""One module per op family. Each module defines ``FAMILY`` for ``fastpath.info()``."""
FAMILY_MODULES = ["softmax", "sampling", "linear", "fp8", "grouped_mm", "moe", "attention", "linalg", "elementwise", "norm", "rope",
                 "gated_delta", "pad", "conv", "channel_norm",
                 "dropout", "batch_norm", "loss", "bincount"]
