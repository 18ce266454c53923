"""Small device values read back to the host: the one sync of a validating call (bincount's
range, take's error word). On CUDA through page-locked words of this host thread (an
asynchronous copy, then a wait on the current stream) rather than ``tolist``'s copy to pageable
memory, which costs a few microseconds more a call (H100, bincount of 16M values: 84.1 -> 80.6 us,
``bench/results/tuning/2026-12-07-s66-bincount_readback-*``)."""
from __future__ import annotations

import threading

import torch

#: "pinned" (above) or "tolist" (the plain copy; the A/B knob).
MODE = "pinned"
_HOST = threading.local()


def read_back(t: torch.Tensor) -> list:
    """``t.tolist()`` for a small 1-D tensor, through page-locked memory on CUDA."""
    if MODE != "pinned" or t.device.type != "cuda":
        return t.tolist()
    held = getattr(_HOST, "held", None)
    if held is None:
        held = _HOST.held = {}
    key = (t.dtype, t.numel())
    host = held.get(key)
    if host is None:
        host = held[key] = torch.empty(t.numel(), dtype=t.dtype, device="cpu", pin_memory=True)
    host.copy_(t, non_blocking=True)
    torch.cuda.current_stream(t.device).synchronize()
    return host.tolist()
