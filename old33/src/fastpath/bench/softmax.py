"""softmax suite: fastpath.softmax / log_softmax against torch.softmax / torch.log_softmax."""
from __future__ import annotations

from .harness import Case, close_check


def _nbytes(shape, itemsize):
    n = 1
    for d in shape:
        n *= d
    return 2 * n * itemsize  # read the input once, write the output once


def _case(shape, dtype, cpu_shape, log=False, **kw) -> Case:
    import torch

    import fastpath
    ours = fastpath.log_softmax if log else fastpath.softmax
    native = torch.log_softmax if log else torch.softmax
    return Case(suite="softmax", name="log_softmax" if log else "softmax", shape=shape, dtype=dtype,
                ours=lambda x: ours(x, -1), native=lambda x: native(x, -1), check=close_check,
                nbytes=_nbytes, cpu_shape=cpu_shape, **kw)


def cases() -> list:
    return [
        _case((1, 128256), "float32", (1, 1000), target=("us", 5.0), graphs=True, hot=True, quick=True),
        _case((1, 128256), "float32", (1, 1000), log=True, target=("us", 5.0), graphs=True, hot=True),
        _case((1, 151936), "float32", (1, 777), graphs=True),
        _case((1, 248320), "float32", (1, 1300), graphs=True),
        _case((64, 128256), "float32", (5, 600), target=("us", 12.0), graphs=True, hot=True, quick=True),
        _case((16384, 131072), "float32", (13, 300), target=("pct_copy", 85.0)),
        _case((4096, 4096), "bfloat16", (7, 200), graphs=True),
        _case((32, 32000), "bfloat16", (3, 1000), graphs=True),
    ]
