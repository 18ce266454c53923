"""``torch.autocast`` for the ops whose PyTorch counterparts autocast casts. Lower precision
(``F.linear``, ``F.scaled_dot_product_attention``): inside an autocast region of the inputs'
device type, their float16 / bfloat16 / float32 tensors are cast to the region's dtype first,
as autocast casts them for PyTorch's op, so the result has the dtype PyTorch's would have.
float64 and float8 tensors (an FP8 weight, its float32 scale stays as it is too) are left
alone, as autocast leaves float64 alone. Float32 (:data:`FP32_OPS`, autocast's lists by device
type): 16-bit inputs are computed and returned as float32."""
from __future__ import annotations

from typing import Optional

import torch

_CAST = (torch.float16, torch.bfloat16, torch.float32)
#: One C call that says whether any autocast region is open (~0.1 us; the per-device question
#: below costs ~0.5 us, on every linear call): private, so looked up with a fallback.
_ANY = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)


def autocast_dtype(t) -> Optional[torch.dtype]:
    """The dtype an autocast region of ``t``'s device type casts to, or None outside one (or
    for a tensor autocast does not know the device of)."""
    if not _ANY() or not isinstance(t, torch.Tensor):
        return None
    try:
        if not torch.is_autocast_enabled(t.device.type):
            return None
    except RuntimeError:  # a device type autocast has no region for (meta...)
        return None
    return torch.get_autocast_dtype(t.device.type)


#: The ops autocast runs in float32, by device type (PyTorch's autocast op lists: CUDA's, which
#: ROCm shares, and the CPU's; other device types: none here).
FP32_OPS = {"cuda": frozenset({"softmax", "log_softmax", "mse_loss"}), "cpu": frozenset({"mse_loss"})}


def autocast_fp32(op: str, t) -> bool:
    """``t`` is a float16 / bfloat16 tensor inside an autocast region that runs ``op`` in float32."""
    return (isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16)
            and autocast_dtype(t) is not None and op in FP32_OPS.get(t.device.type, ()))


def cast(dtype: torch.dtype, *tensors):
    """``tensors`` with each float16 / bfloat16 / float32 tensor as ``dtype`` (others as they are)."""
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.dtype in _CAST and t.dtype != dtype else t
                 for t in tensors)
