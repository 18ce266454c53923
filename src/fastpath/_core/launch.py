"""Host-side helpers for launchers: cheap integer math (Triton's own ``cdiv`` and
``next_power_of_2`` are JIT functions whose host calls cost microseconds each) and
per-(device, stream) workspaces that survive between calls."""
from __future__ import annotations

import torch

_workspaces: dict = {}
_retired: list = []  # outgrown buffers: a captured CUDA graph may still use them, never free


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _raw_stream(index) -> int:
    """The current CUDA stream's handle (torch.cuda.current_stream costs microseconds)."""
    if index is None:
        index = torch.cuda.current_device()
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return getter(index) if getter is not None else torch.cuda.current_stream(index).cuda_stream


def workspace(device: torch.device, name: str, numel: int, dtype: torch.dtype, *, zeroed: bool = False):
    """A cached buffer of at least ``numel`` elements for this device and current stream.

    ``zeroed`` buffers are zero-filled when (re)allocated only: kernels that use them as
    counters must return every counter they touch to zero before they exit. Keying on the
    stream keeps concurrent launches on different streams from sharing counters. Outgrown
    buffers are kept alive, since a captured CUDA graph may still hold their addresses.
    """
    stream = _raw_stream(device.index) if device.type == "cuda" else 0
    key = (device, stream, name)
    buf = _workspaces.get(key)
    if buf is None or buf.numel() < numel:
        if buf is not None:
            _retired.append(buf)
        size = max(numel, 2 * buf.numel() if buf is not None else 4096)
        buf = (torch.zeros if zeroed else torch.empty)(size, dtype=dtype, device=device)
        _workspaces[key] = buf
    return buf
