"""Which path an op takes on given tensors: a Triton kernel or the PyTorch reference.

Importing this module never touches a GPU and works without Triton installed: the
kernel modules decorate their kernels with ``triton.jit`` from here, which is a stand-in
that refuses to launch when Triton is missing.
"""
from __future__ import annotations

import functools
import os

import torch


def _flag(name: str) -> bool:
    return os.environ.get(name, "0").strip().lower() not in ("", "0", "false", "no")


#: Triton's interpreter runs kernels on CPU tensors (tests in CI use this).
INTERPRET = _flag("TRITON_INTERPRET")
#: Set ``FASTPATH_DISABLE_TRITON=1`` to force every op onto its reference path.
DISABLED = _flag("FASTPATH_DISABLE_TRITON")


class _MissingTriton:
    """Stands in for ``triton`` / ``triton.language`` when Triton cannot be imported."""

    def __init__(self, why: str):
        self._why = why

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return _UnavailableKernel(args[0].__name__, self._why)
        return self

    def __getitem__(self, item):
        return self


class _UnavailableKernel:
    def __init__(self, name: str, why: str):
        self.__name__, self._why = name, why

    def __getitem__(self, grid):
        raise RuntimeError(f"kernel {self.__name__} needs Triton, which is unavailable: {self._why}")


try:
    import triton  # noqa: F401
    import triton.language as tl  # noqa: F401

    TRITON_ERROR: str | None = None
    TRITON_VERSION: str | None = triton.__version__
except Exception as exc:  # ImportError, or a broken install
    TRITON_ERROR = f"{type(exc).__name__}: {exc}"
    TRITON_VERSION = None
    triton = _MissingTriton(TRITON_ERROR)  # type: ignore[assignment]
    tl = _MissingTriton(TRITON_ERROR)  # type: ignore[assignment]

#: torch dtype -> Triton dtype, for kernels that take an element type as a constexpr.
TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
if hasattr(torch, "float8_e4m3fn"):
    TL_DTYPES.update({torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5})

#: Oldest CUDA compute capability the kernels are built and tested for.
MIN_CAPABILITY = (8, 0)


@functools.lru_cache(maxsize=None)
def tma_capable(index: int) -> bool:
    """Whether kernels on CUDA device ``index`` can take tensor descriptors (TMA): NVIDIA
    capability 9.0+ and a Triton with host-side ``TensorDescriptor`` (3.4+)."""
    if torch.version.hip is not None or capability(index) < (9, 0):
        return False
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def cooperative_launch() -> bool:
    """Whether this Triton can launch a grid cooperatively (the ``launch_cooperative_grid``
    option of its backends; 3.6 has it): the driver then starts every program at once or
    refuses the launch. Older Tritons launch the same kernels the ordinary way."""
    if INTERPRET:
        return False
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return False
    return "launch_cooperative_grid" in getattr(CUDAOptions, "__dataclass_fields__", {})


def tma_on(device: torch.device) -> bool:
    """Whether kernels on ``device`` may read through tensor descriptors: Triton's interpreter
    (which emulates them) or a CUDA device where :func:`tma_capable` holds."""
    return INTERPRET or (device.type == "cuda" and tma_capable(device.index or 0))


@functools.lru_cache(maxsize=None)
def capability(index: int) -> tuple:
    """CUDA compute capability of GPU ``index`` (cached: the query costs microseconds)."""
    return torch.cuda.get_device_capability(index)


#: Programmatic dependent launch: kernels built with :func:`pdl_start` and launched through
#: ``Launcher(fn, pdl=True)`` on NVIDIA GPUs of compute capability 9.0+ may start while the
#: kernel before them in the stream finishes, then wait for it (``griddepcontrol.wait``)
#: before touching memory, so the launch latency and the gap between kernels overlap the
#: first one's tail. ``FASTPATH_PDL``: 0 off; 1 the kernel lets its successor launch only
#: as its own programs exit; 2 as soon as all its programs have started; 3 as its programs
#: leave their main loops (:func:`pdl_trigger`), for the kernels of the modules PDL_LATE names
#: (the others as in mode 1).
def _pdl_mode(value: str) -> int:
    v = value.strip().lower()
    named = {"": 0, "false": 0, "no": 0, "off": 0, "true": 1, "yes": 1, "on": 1}
    if v in named or v in ("0", "1", "2", "3"):
        return named[v] if v in named else int(v)
    raise ValueError(f"FASTPATH_PDL: expected 0, 1, 2 or 3, got {value!r}")


PDL = _pdl_mode(os.environ.get("FASTPATH_PDL", "3"))
#: Kernel modules (the last part of the module's name) whose kernels trigger late in mode 3. H200,
#: decode A/B (scripts/knob_ab.py, 12 layers, gpu_pending 47-51): against mode 1, Qwen3-30B-A3B
#: +1.5-2.0%, the 8B dense models +0.4-0.7% (the projections' trigger only where they do not split
#: K: with it, -1.8%), LFM2.5 / Qwen3.6 +1.2-1.3% (split-K ones too); the gated delta step's
#: trigger (kept in its kernel, off here) cost Qwen3.6 2%.
PDL_LATE = frozenset({"matvec", "attention", "moe_kernels", "norm", "rope", "conv1d"})


def pdl_value(module: str) -> int:
    """The ``PDL`` constexpr a PDL-launched kernel of ``module`` gets (mode 3 only for PDL_LATE's)."""
    return 1 if PDL == 3 and module.rsplit(".", 1)[-1] not in PDL_LATE else PDL


@functools.lru_cache(maxsize=None)
def pdl_on(index: int) -> bool:
    """True when kernels launched on CUDA device ``index`` use programmatic dependent launch."""
    return pdl_reason(torch.device("cuda", index)) is None


def pdl_reason(device: torch.device | str) -> str | None:
    """``None`` when the decode-path kernels on ``device`` use programmatic dependent launch,
    else why not (for :func:`fastpath.info`)."""
    device = torch.device(device)
    if triton_reason(device) is not None:
        return "no Triton kernels on this device"
    if INTERPRET or device.type != "cuda":
        return "Triton's interpreter"
    if PDL == 0:
        return "FASTPATH_PDL=0"
    if torch.version.hip is not None:
        return "ROCm has no programmatic dependent launch"
    cap = capability(device.index if device.index is not None else torch.cuda.current_device())
    return None if cap >= (9, 0) else f"needs compute capability 9.0+, this GPU has {cap[0]}.{cap[1]}"


@triton.jit
def pdl_start(PDL: tl.constexpr):
    """First statement of a kernel launched with ``Launcher(fn, pdl=True)``: wait until the
    previous kernel of the stream has finished and its writes are visible; ``PDL`` 2: then
    let the next kernel launch (it waits for this one in turn, so every kernel still sees
    its predecessors complete). Nothing when ``PDL`` is 0."""
    if PDL > 0:
        tl.extra.cuda.gdc_wait()
    if PDL == 2:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def pdl_trigger(PDL: tl.constexpr):
    """``PDL`` 3: let the next kernel of the stream launch now (placed after a kernel's main
    loop: its programs then start on the slots this kernel's finished programs leave, and wait
    in :func:`pdl_start` for this kernel to end). Nothing otherwise."""
    if PDL == 3:
        tl.extra.cuda.gdc_launch_dependents()


@functools.lru_cache(maxsize=None)
def _gpu_reason(index: int) -> str | None:
    if torch.version.hip is not None:
        return None
    cap = capability(index)
    if cap < MIN_CAPABILITY:
        name = torch.cuda.get_device_name(index)
        return (f"{name} has compute capability {cap[0]}.{cap[1]}; the kernels need "
                f"{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} or newer")
    return None


def triton_reason(device: torch.device | str) -> str | None:
    """``None`` when Triton kernels serve tensors on ``device``, else the reason they don't."""
    device = torch.device(device)
    if TRITON_ERROR is not None:
        return f"Triton is not importable ({TRITON_ERROR})"
    if DISABLED:
        return "FASTPATH_DISABLE_TRITON is set"
    if INTERPRET:
        if device.type == "cpu":
            return None
        return f"TRITON_INTERPRET=1 runs kernels on CPU tensors, not on {device}"
    if device.type != "cuda":
        return f"Triton kernels run on CUDA/ROCm GPUs, not on {device.type}"
    return _gpu_reason(device.index if device.index is not None else torch.cuda.current_device())


def needs_grad(*tensors) -> bool:
    """Autograd is recording and one of ``tensors`` requires a gradient: an inference-only
    kernel must leave such a call to its PyTorch path, whose ops autograd records."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def use_triton(t: torch.Tensor) -> bool:
    """True when the Triton kernels serve tensor ``t``'s device."""
    return triton_reason(t.device) is None


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


@functools.lru_cache(maxsize=None)
def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors on ``device`` (a small stand-in for the interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4
