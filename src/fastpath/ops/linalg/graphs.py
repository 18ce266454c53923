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
    """``cache(key, fn, A, keep)`` returns ``fn(A)`` (a tuple of new tensors, None allowed): run
    directly on the first call of ``key`` (which compiles the kernels), captured as a CUDA graph
    on the second (on a private copy of A, kept with the graph's outputs: several times A's
    memory) and replayed from then on, the outputs cloned. ``in_place`` (optional): what the
    graph captures instead of ``fn``, the same results but free to overwrite its argument, the
    private copy (e.g. a factorisation in that copy: one copy of A fewer a call). The ``keep``
    most recently used graphs are kept (a call's ``keep``, so that a module knob can set it).
    Direct calls where graphs cannot help or would be wrong: off CUDA, in Triton's interpreter,
    while the caller is capturing or compiling, or ``keep`` = 0."""

    def __init__(self):
        self.entries: dict = {}

    def __call__(self, key: Hashable, fn: Callable, A: torch.Tensor, keep: int, in_place: Optional[Callable] = None):
        if (keep <= 0 or INTERPRET or A.device.type != "cuda"
                or torch.cuda.is_current_stream_capturing() or torch.compiler.is_compiling()):
            return fn(A)
        entries = self.entries
        entry = entries.pop(key, None)
        if entry is None:  # the first call of this key runs directly
            entries[key] = "seen"
            while len(entries) > 4 * keep:
                entries.pop(next(iter(entries)))
            return fn(A)
        stream = torch.cuda.current_stream(A.device)
        if entry == "seen":
            with torch.inference_mode(False):  # kept across modes: never inference tensors
                static = A.contiguous().clone()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = (in_place or fn)(static)
            entry = [graph, static, out, stream]
        graph, static, out, last = entry
        if last != stream:  # the previous replay (and its outputs' copies) ran on another stream
            stream.wait_stream(last)
            entry[3] = stream
        entries[key] = entry  # most recent last
        captured = [k for k, v in entries.items() if v != "seen"]
        for k in captured[:-keep]:
            entries.pop(k)
        static.copy_(A)
        graph.replay()
        return tuple(None if t is None else t.clone() for t in out)
