"""FP8: ``quantize_fp8`` (tensor-, row- and block-wise scales) and ``scaled_mm``.

``bits``: dtypes, limits and exact in-kernel bit conversion; ``quantize``: the quantisation
kernel and op; ``scaled_mm``: the matrix-vector (M <= 16) and tiled (tensor-core) kernels.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..._core.backend import triton_reason
from .bits import fp8_max
from .quantize import quantize_fp8, reference_quantize_fp8
from .scaled_mm import ScalingType, reference_scaled_mm, scaled_mm

__all__ = ["ScalingType", "fp8_max", "quantize_fp8", "reference_quantize_fp8", "reference_scaled_mm",
           "scaled_mm", "FAMILY"]


def _reason(device) -> Optional[str]:
    if not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no float8 dtypes (needs torch 2.1 or newer)"
    return triton_reason(device)


FAMILY = {"name": "fp8", "ops": ["quantize_fp8", "scaled_mm"], "reason": _reason}
