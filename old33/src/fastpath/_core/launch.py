"""Host-side helpers for launchers: cheap integer math (Triton's own ``cdiv`` and
``next_power_of_2`` are JIT functions whose host calls cost microseconds each),
per-(device, stream) workspaces that survive between calls, and :class:`Launcher`, which
launches an already-compiled kernel without Triton's per-call argument binding."""
from __future__ import annotations

import os
import threading

import torch

from .backend import INTERPRET, PDL, pdl_on

#: :class:`Launcher`'s cached relaunch, on by default since it passed ``scripts/launch_check.py``
#: on the H200 (every op's second launch equal to its first); ``FASTPATH_FAST_LAUNCH=0`` turns
#: it off, and every launch goes through Triton's ``kernel[grid](...)``.
FAST_LAUNCH = os.environ.get("FASTPATH_FAST_LAUNCH", "1") == "1"

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
        with torch.inference_mode(False):  # kept across modes: never an inference tensor
            buf = (torch.zeros if zeroed else torch.empty)(size, dtype=dtype, device=device)
        _workspaces[key] = buf
    return buf


def _spec(a):
    """What Triton specialises a compiled kernel on, or finer: dtype and 16-byte alignment
    of tensors; for integers equal-to-1, divisible-by-16 and 32-bit range; dtype, block shape
    and padding of tensor descriptors; types otherwise."""
    return _specs((a,))[0]


_Tensor = torch.Tensor


def _specs(args) -> tuple:
    """:func:`_spec` of each argument, in one comprehension (a Python call per argument costs
    more than the checks themselves on a slow host)."""
    return tuple([(a == 1, not a & 15, -2147483648 <= a < 2147483648) if type(a) is int else
                  (a.dtype, not a.data_ptr() & 15) if isinstance(a, _Tensor) else
                  (bool, a) if type(a) is bool else float if type(a) is float else
                  (a.base.dtype, tuple(a.block_shape), a.padding) if hasattr(a, "block_shape") else a
                  for a in args])


class Launcher:
    """``Launcher(jit_fn)[grid](*args, **kwargs)`` launches like ``jit_fn[grid](...)``.

    Triton binds and specialises every argument in Python on each call (tens of
    microseconds). Here the first call of each specialisation key goes through Triton, which
    compiles and returns the kernel; later calls with the same key hand the arguments
    straight to that compiled kernel's launcher. The key holds every constexpr and option
    and, per runtime argument (by position or by name), at least what Triton specialises on
    (:func:`_spec`: a tensor by dtype and alignment, never by identity), plus the current
    device, so a cached kernel is only reused where Triton would pick it too. Arguments a
    call leaves out take the kernel's defaults.
    Off in Triton's interpreter, when Triton launch hooks are set, or with
    ``FASTPATH_FAST_LAUNCH=0``.

    ``pdl=True``: the kernel takes a ``PDL: tl.constexpr`` argument and starts with
    ``pdl_start(PDL)`` (:mod:`fastpath._core.backend`); where :func:`pdl_on` holds, it is
    launched as a programmatic dependent launch with ``PDL`` = ``backend.PDL``, elsewhere ``PDL=0``."""

    def __init__(self, fn, *, pdl: bool = False):
        self.fn, self.pdl = fn, pdl
        self.kernels: dict = {}
        params = getattr(fn, "params", None)
        self.names = [p.name for p in params] if params is not None and not INTERPRET else None
        # defaults of the arguments a call may leave out (the compiled kernel takes every one)
        self.defaults = {p.name: p.default for p in params or () if getattr(p, "has_default", False)}
        # runtime (not constexpr) parameters: keyed by their specialisation when passed by name too
        self.runtime = {p.name for p in params or () if getattr(p, "is_constexpr", True) is False}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid, args, kwargs):
        # None: the interpreter, or compiling (dynamo traces kernel[grid] itself)
        dev = None if INTERPRET or torch.compiler.is_compiling() else torch.cuda.current_device()
        if self.pdl:
            on = dev is not None and pdl_on(dev)
            kwargs = {**kwargs, "PDL": PDL if on else 0, **({"launch_pdl": True} if on else {})}
        if not FAST_LAUNCH or self.names is None or _hooks_set() or dev is None:
            records = getattr(RECORDING, "records", None)
            if records is not None:
                records.append(None)  # not replayable (fastpath._core.memo)
            return self.fn[grid](*args, **kwargs)
        try:
            key = (dev, _specs(args), tuple(kwargs.items()) if self.runtime.isdisjoint(kwargs) else
                   tuple((n, _spec(v) if n in self.runtime else v) for n, v in kwargs.items()))
        except RuntimeError:  # tensors without storage (fake tensors while tracing): no cache
            records = getattr(RECORDING, "records", None)
            if records is not None:
                records.append(None)
            return self.fn[grid](*args, **kwargs)
        entry = self.kernels.get(key)
        n = len(args)
        if n < len(self.names):
            full = args + tuple([kwargs[k] if k in kwargs else self.defaults[k] for k in self.names[n:]])
        else:
            full = args
        g = tuple(grid) + (1,) * (3 - len(grid))
        if entry is None:
            kernel = self.fn[grid](*args, **kwargs)
            # Triton's CompiledKernel.__getitem__ (3.x) calls run(...) as below; where a
            # kernel lacks those attributes, later calls go through kernel[grid] instead
            direct = all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata"))
            self.kernels[key] = entry = (kernel, kernel.run if direct else None)
        else:
            kernel, run = entry
            if run is None:
                kernel[g](*full, stream=_raw_stream(dev))
            else:
                run(g[0], g[1], g[2], _raw_stream(dev), kernel.function, kernel.packed_metadata, None, None, None,
                    *full)
        records = getattr(RECORDING, "records", None)
        if records is not None:
            kernel, run = entry
            records.append(None if run is None else (run, kernel.function, kernel.packed_metadata, g, full))
        return kernel


#: ``RECORDING.records``, while fastpath._core.memo records a call in this thread: each
#: launch's (run, function, packed metadata, grid, every argument as ``run`` takes them), or
#: None for a launch it cannot replay.
RECORDING = threading.local()


_knobs = None


def _hooks_set() -> bool:
    """A profiler or tool hooked Triton's launches: let Triton launch, so that they run."""
    global _knobs
    if _knobs is None:
        try:
            from triton import knobs
            _knobs = knobs.runtime
        except (ImportError, AttributeError):
            _knobs = False
    if _knobs is False:
        return False
    hooks = (_knobs.launch_enter_hook, _knobs.launch_exit_hook)
    return any(h is not None and getattr(h, "calls", True) for h in hooks)  # HookChain: empty = unset
