"""Argument checks shared by the ops. Every message names the argument, what was expected
and what arrived."""
from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
#: Dtypes the Triton kernels read and write (float64 takes the reference path).
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_tensor(name: str, t, *, dtypes=None, what: str = "") -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name}: {what or 'dtype'} must be one of {names}, got {t.dtype}")


def normalize_dim(name: str, dim: int, ndim: int) -> int:
    """PyTorch's dim wrapping, with a message that names the argument."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: expected an int, got {type(dim).__name__}")
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= dim <= hi:
        raise IndexError(f"{name}: expected a dimension in [{lo}, {hi}] for a {ndim}-D input, got {dim}")
    return dim % max(ndim, 1)


def require_fp8() -> None:
    """Raise if this torch build has no ``float8_e4m3fn`` dtype."""
    if not hasattr(torch, "float8_e4m3fn"):
        raise RuntimeError(f"FP8 tensors need torch.float8_e4m3fn, which torch {torch.__version__} "
                           "does not have; install torch 2.1 or newer")


def alert_nondeterministic(what: str) -> None:
    """PyTorch's answer to an op without a deterministic algorithm under
    ``torch.use_deterministic_algorithms(True)``: a RuntimeError, or a warning with
    ``warn_only=True``; nothing when the mode is off."""
    if not torch.are_deterministic_algorithms_enabled():
        return
    msg = (f"{what} does not have a deterministic implementation, but you set "
           "'torch.use_deterministic_algorithms(True)'. Turn determinism off around this call, or pass "
           "warn_only=True there, if that is acceptable for your application.")
    if torch.is_deterministic_algorithms_warn_only_enabled():
        import warnings
        warnings.warn(msg, UserWarning, stacklevel=3)
    else:
        raise RuntimeError(msg)


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def require_no_capture(device: torch.device, op: str, why: str, instead: str) -> None:
    """Raise before an op that reads a result back to the host (``why``) runs inside a CUDA
    graph capture, where the read would fail with an unrelated CUDA error and spoil the
    capture; ``instead`` says how to call it so that it can be captured."""
    if _capturing(device):
        raise RuntimeError(f"{op}: {why}, which a CUDA graph capture cannot do; {instead}")
