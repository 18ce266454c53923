"""Modules built on fastpath ops, and model-wide swaps that act on the module they are given."""
from .fp8_linear import FP8Linear, quantize_

__all__ = ["FP8Linear", "quantize_"]
