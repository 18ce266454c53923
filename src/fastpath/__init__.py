"""fastpath: Triton kernels for PyTorch, with a PyTorch reference path on every device.

Importing fastpath never launches GPU work and works without Triton or a GPU.
"""
from .info import info
from .ops.sampling import reference_sample, sample
from .ops.softmax import log_softmax, reference_softmax, softmax

__version__ = "0.1.0"
__all__ = ["info", "softmax", "log_softmax", "sample", "reference_softmax", "reference_sample",
           "__version__"]
