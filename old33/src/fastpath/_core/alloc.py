"""Output allocation. In tests, ``POISON`` fills every new output with NaN (floats) or a
sentinel (integers) so that an element a kernel forgets to write cannot pass."""
from __future__ import annotations

import torch

POISON = False


def empty(*shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    out = torch.empty(*shape, dtype=dtype, device=device)
    if POISON:
        if out.dtype.is_floating_point or out.dtype.is_complex:
            out.fill_(float("nan"))
        else:
            out.fill_(torch.iinfo(out.dtype).min if out.dtype != torch.bool else True)
    return out
