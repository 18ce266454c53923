"""Shape arithmetic for the host path of eager calls."""
from __future__ import annotations

import torch


def broadcast_shape(*shapes) -> tuple:
    """``torch.broadcast_shapes`` of int sequences, in plain Python: PyTorch's goes through
    ``torch._refs`` (tens of microseconds a call on slow hosts). Symbolic sizes (tracing) are
    handed to PyTorch's. RuntimeError where the shapes do not broadcast."""
    first = tuple(shapes[0])
    if all(tuple(sh) == first for sh in shapes[1:]):
        return first
    if not all(type(d) is int for sh in shapes for d in sh):
        return tuple(torch.broadcast_shapes(*shapes))
    out = [1] * max(len(sh) for sh in shapes)
    for sh in shapes:
        for i, d in enumerate(sh, start=len(out) - len(sh)):
            if d != 1:
                if out[i] not in (1, d):
                    raise RuntimeError(f"shapes {tuple(tuple(s) for s in shapes)} do not broadcast")
                out[i] = d
    return tuple(out)


def broadcast_pair(a: torch.Tensor, b: torch.Tensor) -> tuple:
    """``torch.broadcast_tensors(a, b)`` without its Python overhead where the shapes match."""
    if a.shape == b.shape:
        return a, b
    shape = broadcast_shape(a.shape, b.shape)
    return a.expand(shape), b.expand(shape)
