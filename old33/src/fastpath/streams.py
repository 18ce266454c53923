"""Streams and events with one API on every accelerator PyTorch has, and on the CPU.

Device-agnostic code overlaps work the same way everywhere::

    side = fastpath.streams.Stream()            # on the current accelerator, or the CPU
    done = fastpath.streams.Event()
    with fastpath.streams.stream(side):
        ids_host = ids.to("cpu", non_blocking=True)
        done.record()
    ...                                          # more work on the current stream
    done.synchronize()

Backends: CUDA/ROCm and XPU use ``torch.cuda`` / ``torch.xpu`` (their streams are
``torch.cuda.Stream`` / ``torch.xpu.Stream``); any other accelerator (MPS, ...) uses the
device-generic ``torch.accelerator`` functions with ``torch.Stream`` / ``torch.Event``. On the
CPU work is synchronous: streams are bookkeeping only (``stream(s)`` makes ``s`` current in
this thread), waits and synchronizations return at once, and an event records a host
timestamp (``time.perf_counter_ns``), so ``elapsed_time`` measures host time there.

Timing guarantees (all backends): ``elapsed_time`` waits for both events itself, so it never
fails with "not ready"; synchronizing or waiting on an event that was never recorded returns
at once (no hang); and for two events recorded in that order on one stream the interval is
never negative (device timers tick in about half a microsecond; a back-to-back pair can read
a tiny negative value, which is reported as 0).

:func:`timed` measures a callable the way the benchmark harness does.
"""
from __future__ import annotations

import functools
import itertools
import statistics
import threading
import time
from typing import Callable, Optional

import torch

#: L2 size assumed where the device does not report one (bytes).
DEFAULT_L2 = 64 * 2**20

__all__ = ["Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
           "synchronize", "record_stream", "timed"]

_seq = itertools.count(1)  # host-side order of event records
_cpu_ids = itertools.count(1)  # CPU stream ids; 0 is the CPU default stream
_local = threading.local()  # .cpu: this thread's current CPU stream


@functools.lru_cache(maxsize=None)
def _accelerator_type() -> Optional[str]:
    """The device type of this machine's accelerator, or None (CPU only)."""
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_accelerator"):
        try:
            if acc.is_available():
                return acc.current_accelerator().type
            return None
        except RuntimeError:
            pass
    for kind in ("cuda", "xpu", "mps"):
        mod = getattr(torch, kind, None)
        if mod is not None and mod.is_available():
            return kind
    return None


def _module(kind: str):
    """``torch.cuda`` / ``torch.xpu``: backends with their own Stream/Event classes."""
    return getattr(torch, kind) if kind in ("cuda", "xpu") else None


def _device(device) -> torch.device:
    """``device`` with its index filled in (None: the current accelerator, or the CPU)."""
    if isinstance(device, Stream):
        return device.device
    if device is None:
        kind = _accelerator_type()
        if kind is None:
            return torch.device("cpu")
        device = kind
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise TypeError(f"device: expected a torch.device, a device string or an int, got {device!r}") from None
    if dev.type == "cpu" or dev.index is not None:
        return dev
    mod = _module(dev.type)
    if mod is not None:
        return torch.device(dev.type, mod.current_device())
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_device_index"):
        return torch.device(dev.type, acc.current_device_index())
    return torch.device(dev.type, 0)


def _generic(what: str, dev: torch.device):
    """``torch.accelerator.<what>`` for backends without a torch.<type> stream API."""
    fn = getattr(getattr(torch, "accelerator", None), what, None)
    if fn is None:
        raise NotImplementedError(f"device: streams on {dev.type} need torch.accelerator.{what}, "
                                  f"which torch {torch.__version__} does not have")
    return fn


# ---------------------------------------------------------------------------- streams

class Stream:
    """A queue of work on one device: ``Stream(device=None, priority=0)``.

    ``device`` defaults to the current accelerator (the CPU when there is none); ``priority``
    as in ``torch.cuda.Stream`` (lower is higher priority; ignored on the CPU). Wraps the
    backend's stream, available as ``.native`` (None on the CPU); ``Stream.wrap(s)`` wraps an
    existing torch stream. Two wrappers of the same stream compare equal.
    """

    __slots__ = ("device", "native", "_id")

    def __init__(self, device=None, priority: int = 0):
        dev = _device(device)
        self.device, self.native, self._id = dev, None, None
        if dev.type == "cpu":
            self._id = next(_cpu_ids)
            return
        mod = _module(dev.type)
        if mod is not None:
            self.native = mod.Stream(device=dev, priority=priority)
        else:
            try:
                self.native = torch.Stream(device=dev, priority=priority)
            except (RuntimeError, TypeError) as exc:
                raise NotImplementedError(f"device: torch {torch.__version__} cannot create a stream on "
                                          f"{dev}: {exc}") from None

    @classmethod
    def wrap(cls, native) -> "Stream":
        """A :class:`Stream` for an existing ``torch.Stream`` (``torch.cuda.Stream``, ...)."""
        if isinstance(native, Stream):
            return native
        if not isinstance(native, torch.Stream):
            raise TypeError(f"stream: expected a fastpath.streams.Stream, a torch.Stream or None, "
                            f"got {type(native).__name__}")
        s = cls.__new__(cls)
        dev = native.device
        s.native, s._id = native, None
        if dev.type == "cpu":
            return _CPU_DEFAULT
        s.device = torch.device(dev.type, native.device_index if dev.index is None else dev.index)
        return s

    @classmethod
    def _cpu(cls, ident: int) -> "Stream":
        s = cls.__new__(cls)
        s.device, s.native, s._id = torch.device("cpu"), None, ident
        return s

    def query(self) -> bool:
        """True when all work submitted to the stream has completed."""
        return True if self.native is None else bool(self.native.query())

    def synchronize(self) -> None:
        """Wait on the host until all work submitted to the stream has completed."""
        if self.native is not None:
            self.native.synchronize()

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        """Record ``event`` (a new one if None) on this stream; returns it."""
        event = Event() if event is None else event
        return event.record(self)

    def wait_event(self, event: "Event") -> None:
        """Make future work on this stream wait for ``event``."""
        _check_event("event", event)
        event.wait(self)

    def wait_stream(self, other) -> None:
        """Make future work on this stream wait for the work submitted to ``other`` so far."""
        other = _as_stream("other", other)
        if other.native is None:
            return  # CPU work is complete once submitted
        if self.native is None:
            other.synchronize()  # CPU work after this point waits on the host
        else:
            if other.device.type != self.device.type:
                raise ValueError(f"other: a {self.device.type} stream cannot wait for a "
                                 f"{other.device.type} stream")
            self.native.wait_stream(other.native)

    def __eq__(self, other) -> bool:
        if isinstance(other, torch.Stream):
            other = Stream.wrap(other)
        if not isinstance(other, Stream):
            return NotImplemented
        if self.native is None or other.native is None:
            return self.native is other.native and self._id == other._id
        return self.native == other.native

    def __hash__(self) -> int:
        return hash(self._id) if self.native is None else hash((self.device.type, self.native.stream_id,
                                                                 self.native.device_index))

    def __repr__(self) -> str:
        what = f"id={self._id}" if self.native is None else repr(self.native)
        return f"fastpath.streams.Stream({self.device}, {what})"


_CPU_DEFAULT = Stream._cpu(0)


def _as_stream(name: str, s) -> Stream:
    if isinstance(s, Stream):
        return s
    if isinstance(s, torch.Stream):
        return Stream.wrap(s)
    raise TypeError(f"{name}: expected a fastpath.streams.Stream or a torch.Stream, got {type(s).__name__}")


def current_stream(device=None) -> Stream:
    """The stream new work on ``device`` goes to (default: the current accelerator, or the CPU)."""
    dev = _device(device)
    if dev.type == "cpu":
        return getattr(_local, "cpu", _CPU_DEFAULT)
    mod = _module(dev.type)
    native = mod.current_stream(dev) if mod is not None else _generic("current_stream", dev)(dev)
    return Stream.wrap(native)


def default_stream(device=None) -> Stream:
    """The default (legacy / null) stream of ``device``."""
    dev = _device(device)
    if dev.type == "cpu":
        return _CPU_DEFAULT
    mod = _module(dev.type)
    if mod is not None:
        return Stream.wrap(mod.default_stream(dev))
    # torch.accelerator has no default_stream: single-stream backends (MPS) have one stream
    return Stream.wrap(_generic("current_stream", dev)(dev))


def set_stream(s) -> None:
    """Make ``s`` the current stream of its device (prefer the :func:`stream` context)."""
    s = _as_stream("stream", s)
    if s.device.type == "cpu":
        _local.cpu = s
        return
    mod = _module(s.device.type)
    if mod is not None:
        mod.set_stream(s.native)
    else:
        _generic("set_stream", s.device)(s.native)


class stream:  # noqa: N801 (a context manager, named like torch.cuda.stream)
    """``with stream(s):`` makes ``s`` the current stream of its device (and, for CUDA/XPU,
    its device the current device) inside the block; ``stream(None)`` does nothing. Restores
    the previous current stream on exit, also after an exception. Accepts a
    :class:`Stream` or a ``torch.Stream``."""

    def __init__(self, s):
        self.stream = None if s is None else _as_stream("stream", s)
        self._ctx = self._prev = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        if s.device.type == "cpu":
            self._prev = getattr(_local, "cpu", _CPU_DEFAULT)
            _local.cpu = s
            return s
        mod = _module(s.device.type)
        if mod is not None:
            self._ctx = mod.stream(s.native)
            self._ctx.__enter__()
        else:
            self._prev = _generic("current_stream", s.device)(s.device)
            _generic("set_stream", s.device)(s.native)
        return s

    def __exit__(self, *exc):
        s = self.stream
        if s is None:
            return False
        if s.device.type == "cpu":
            _local.cpu = self._prev
        elif self._ctx is not None:
            self._ctx.__exit__(*exc)
        else:
            _generic("set_stream", s.device)(self._prev)
        self._ctx = self._prev = None
        return False


def synchronize(device=None) -> None:
    """Wait until all work on all streams of ``device`` has completed (CPU: returns at once)."""
    dev = _device(device)
    if dev.type == "cpu":
        return
    mod = _module(dev.type)
    if mod is not None:
        mod.synchronize(dev)
    else:
        _generic("synchronize", dev)(dev)


def record_stream(tensor: torch.Tensor, s) -> None:
    """Tell the caching allocator that ``tensor`` is in use on stream ``s``, so that its memory
    is not reused before the work queued there so far has completed (``Tensor.record_stream``).
    A no-op for CPU tensors and CPU streams."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor: expected a torch.Tensor, got {type(tensor).__name__}")
    s = _as_stream("stream", s)
    if tensor.device.type == "cpu" or s.device.type == "cpu":
        return
    if tensor.device.type != s.device.type:
        raise ValueError(f"stream: a {tensor.device.type} tensor cannot be recorded on a "
                         f"{s.device.type} stream")
    tensor.record_stream(s.native)


# ---------------------------------------------------------------------------- events

def _check_event(name: str, e) -> None:
    if not isinstance(e, Event):
        raise TypeError(f"{name}: expected a fastpath.streams.Event, got {type(e).__name__}")


class Event:
    """A marker in a stream: ``Event(enable_timing=False, *, blocking=False, device=None)``.

    The device is bound on the first :meth:`record` (the recording stream's device; with
    ``device`` given, recording on another device type raises). On the CPU an event records
    a host timestamp. ``blocking`` (CUDA) makes :meth:`synchronize` block the thread instead
    of spinning. The backend's event is ``.native`` (None on the CPU or before a record).
    """

    __slots__ = ("enable_timing", "blocking", "native", "_device", "_stream", "_host_ns", "_seq")

    def __init__(self, enable_timing: bool = False, *, blocking: bool = False, device=None):
        self.enable_timing, self.blocking = bool(enable_timing), bool(blocking)
        self._device = None if device is None else _device(device)
        self.native, self._stream, self._host_ns, self._seq = None, None, None, 0

    @property
    def recorded(self) -> bool:
        return self._seq > 0

    def _new_native(self, dev: torch.device):
        mod = _module(dev.type)
        if dev.type == "cuda":
            return mod.Event(enable_timing=self.enable_timing, blocking=self.blocking)
        if mod is not None:
            return mod.Event(enable_timing=self.enable_timing)
        return torch.Event(device=dev, enable_timing=self.enable_timing)

    def record(self, stream=None) -> "Event":
        """Record the event on ``stream`` (default: the current stream of the event's device,
        or of the current accelerator); it completes when the work queued there so far has.
        Returns the event."""
        s = current_stream(self._device) if stream is None else _as_stream("stream", stream)
        if self._device is not None and s.device.type != self._device.type:
            raise ValueError(f"stream: this event is for {self._device.type}, got a {s.device.type} stream")
        if s.device.type == "cpu":
            self._host_ns = time.perf_counter_ns()
        else:
            if self.native is None or (self._stream is not None and self._stream.device != s.device):
                self.native = self._new_native(s.device)
            self.native.record(s.native)
        self._device, self._stream, self._seq = s.device, s, next(_seq)
        return self

    def wait(self, stream=None) -> None:
        """Make future work on ``stream`` (default: the current one) wait for this event. A
        no-op for an event never recorded and for a CPU event; a CPU stream waiting for an
        accelerator event waits on the host."""
        s = current_stream(self._device) if stream is None else _as_stream("stream", stream)
        if not self.recorded or self.native is None:
            return  # never recorded, or a CPU event (complete when recorded)
        if s.native is None:
            self.synchronize()  # CPU work after this point waits on the host
            return
        if s.device.type != self._device.type:
            raise ValueError(f"stream: a {s.device.type} stream cannot wait for a {self._device.type} event")
        self.native.wait(s.native)

    def query(self) -> bool:
        """True when the work before the event has completed (or it was never recorded)."""
        return True if self.native is None or not self.recorded else bool(self.native.query())

    def synchronize(self) -> None:
        """Wait on the host for the event; returns at once if it was never recorded."""
        if self.native is not None and self.recorded:
            self.native.synchronize()

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end``. Waits for both events. Two events recorded
        in this order on one stream never give a negative value.

        Raises
        ------
        TypeError if ``end`` is not an Event; ValueError naming ``start`` (this event) or
        ``end`` if it was created without ``enable_timing`` or never recorded, or if the two
        are on different device types.
        """
        _check_event("end", end)
        for name, e in (("start", self), ("end", end)):
            if not e.enable_timing:
                raise ValueError(f"{name}: elapsed_time needs events created with enable_timing=True")
            if not e.recorded:
                raise ValueError(f"{name}: the event was never recorded")
        if self._device.type != end._device.type:
            raise ValueError(f"end: recorded on {end._device.type}, the start event on {self._device.type}")
        if self._device.type == "cpu":
            return (end._host_ns - self._host_ns) / 1e6
        end.synchronize()
        self.synchronize()
        ms = float(self.native.elapsed_time(end.native))
        if ms < 0 and end._seq > self._seq and end._stream == self._stream:
            ms = 0.0  # in order on one stream: below the timer's resolution, not reversed
        return ms

    def __repr__(self) -> str:
        where = self._device if self.recorded else "not recorded"
        return f"fastpath.streams.Event({where}, enable_timing={self.enable_timing})"


# ---------------------------------------------------------------------------- timing

@functools.lru_cache(maxsize=None)
def _flush_buffer(dev: torch.device) -> torch.Tensor:
    """Twice the L2 size of ones on ``dev``, kept for the process: reading it evicts the cache
    (clean lines, nothing to write back)."""
    props = torch.cuda.get_device_properties(dev) if dev.type == "cuda" else None
    l2 = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2)
    return torch.ones(2 * l2 // 4, device=dev)


def _first_tensor_device(args, kwargs):
    for a in itertools.chain(args, kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a.device
    return None


def timed(fn: Callable, *args, warmup: int = 3, iters: Optional[int] = None, cold_l2: bool = True,
          device=None, **kwargs) -> float:
    """Median milliseconds of ``fn(*args, **kwargs)``, measured as the benchmark harness does.

    ``warmup`` untimed calls (compilation, autotuning), then ``iters`` calls, each between
    two events on the current stream; the median of the per-call intervals. ``iters=None``
    follows the harness: one timed call estimates the cost, then about 200 ms of calls
    (10 to 100). ``cold_l2`` reads a buffer of twice the L2 size before each timed call,
    outside the timed interval (on the CPU caches are not flushed). ``device`` defaults to the device
    of the first tensor argument, else the current accelerator, else the CPU (there the
    events record host time, which covers the synchronous work).

    Raises
    ------
    TypeError if ``fn`` is not callable; ValueError naming ``warmup`` / ``iters`` if negative
    / not positive.

    Example
    -------
    >>> import torch, fastpath
    >>> ms = fastpath.timed(torch.matmul, torch.randn(256, 256), torch.randn(256, 256), iters=20)
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup: expected an int >= 0, got {warmup!r}")
    if iters is not None and (isinstance(iters, bool) or not isinstance(iters, int) or iters < 1):
        raise ValueError(f"iters: expected None or an int >= 1, got {iters!r}")
    dev = _device(device if device is not None else _first_tensor_device(args, kwargs))

    def call():
        fn(*args, **kwargs)

    before = _flush_buffer(dev).sum if cold_l2 and dev.type != "cpu" else None
    for _ in range(warmup):
        call()
    if iters is None:
        iters = reps_for(median_ms(call, 1, before, dev))
    return median_ms(call, iters, before, dev)


def reps_for(est_ms: float) -> int:
    """The repetition count of an eager timing: about 200 ms of calls, 10 to 100."""
    return max(10, min(100, int(200 / (est_ms + 0.05))))


def median_ms(call: Callable, reps: int, before: Optional[Callable] = None, device=None) -> float:
    """Median milliseconds of ``reps`` calls of ``call``, each between two events on the
    current stream of ``device`` (default: the current accelerator), ``before()`` run
    outside every interval. The timing core of :func:`timed` and of the benchmark harness."""
    dev = _device(device)
    ev = [(Event(enable_timing=True, device=dev), Event(enable_timing=True, device=dev))
          for _ in range(reps)]
    for start, end in ev:
        if before is not None:
            before()
        start.record()
        call()
        end.record()
    synchronize(dev)
    return statistics.median(s.elapsed_time(e) for s, e in ev)
