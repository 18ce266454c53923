"""What the blocked factorisations' host loops share: float32 matmuls kept exact for the
duration of a loop, and a cache of CUDA graphs that replays a whole loop (hundreds of launches
and matmuls issued from Python) from the second call of a shape on."""
from __future__ import annotations

import contextlib
from typing import Callable, Hashable, Optional

import torch

from ..._core.backend import INTERPRET


@contextlib.contextmanager
def exact_matmuls():
    """float32 matmuls in full float32 for the duration (a user's TF32 setting restored)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


class GraphCache:
    """``cache(key, fn, A, keep)`` returns ``fn(A)`` (a tuple of new tensors, None allowed; A a
    tensor or a tuple of them, ``fn(*A)``): run directly on the first call of ``key`` (which
    compiles the kernels), captured as a CUDA graph on the second (on a private copy of A, kept
    with the graph's outputs: several times A's memory) and replayed from then on, the outputs
    cloned. ``in_place`` (optional): what the graph captures instead of ``fn``, the same results
    but free to overwrite its argument, the private copy (e.g. a factorisation in that copy: one
    copy of A fewer a call). ``by_address``: no private copy; the graph reads A where it lies, and
    the key takes A's addresses, shapes and strides (a replay only for tensors at the captured
    addresses, so it reads them whatever they hold now; ``fn`` must not write A). The ``keep``
    most recently used graphs are kept (a call's ``keep``, so that a module knob can set it); a
    key whose graph was dropped for a newer one runs directly for its next ``DROPPED_WAIT``
    calls before it may be captured again, so that callers cycling through more keys than
    ``keep`` pay a capture (more host time than a direct call) every few passes, not on each.
    Direct calls where graphs cannot help or would be wrong: off CUDA, in Triton's interpreter,
    while the caller is capturing or compiling, or ``keep`` = 0."""

    DROPPED_WAIT = 8

    def __init__(self):
        self.entries: dict = {}

    def __call__(self, key: Hashable, fn: Callable, A, keep: int, in_place: Optional[Callable] = None,
                 by_address: bool = False):
        args = A if isinstance(A, tuple) else (A,)
        dev = args[0].device
        if (keep <= 0 or INTERPRET or dev.type != "cuda"
                or torch.cuda.is_current_stream_capturing() or torch.compiler.is_compiling()):
            return fn(*args)
        if by_address:
            key = (key, tuple((a.data_ptr(), tuple(a.shape), a.stride(), a.dtype) for a in args))
        entries = self.entries
        entry = entries.pop(key, None)
        if entry is None or isinstance(entry, int):  # a key's first call runs directly, as do the
            entries[key] = entry - 1 if entry else "seen"  # next calls of a key whose graph was dropped
            while len(entries) > 4 * keep:
                entries.pop(next(iter(entries)))
            return fn(*args)
        stream = torch.cuda.current_stream(dev)
        if entry == "seen":
            with torch.inference_mode(False):  # kept across modes: never inference tensors
                static = () if by_address else tuple(a.contiguous().clone() for a in args)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = (in_place or fn)(*(args if by_address else static))
            entry = [graph, static, out, stream]
        graph, static, out, last = entry
        if last != stream:  # the previous replay (and its outputs' copies) ran on another stream
            stream.wait_stream(last)
            entry[3] = stream
        entries[key] = entry  # most recent last
        captured = [k for k, v in entries.items() if isinstance(v, list)]
        for k in captured[:-keep]:
            entries[k] = max(self.DROPPED_WAIT - 1, 0)  # calls left after the next, then "seen"
        for s, a in zip(static, args):
            s.copy_(a)
        graph.replay()
        return tuple(None if t is None else t.clone() for t in out)
