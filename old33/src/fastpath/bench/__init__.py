"""Benchmark harness and one suite per op family: ``python -m fastpath.bench [suite ...]``.

``harness`` times and records, ``__main__`` is the command line, ``report`` writes
docs/perf.md from the JSONL records. Importing this package starts no GPU work.
"""
from __future__ import annotations

import importlib

#: Suite name -> module in this package defining ``cases() -> list[Case]``.
SUITES = ("softmax", "sampling", "linear", "fp8", "moe", "attention", "recurrent", "pad", "conv", "training", "linalg", "elementwise", "channel_norm")


def load_cases(names=None, quick: bool = False) -> list:
    """The cases of the named suites (default: all), only the ``quick`` ones if asked."""
    out = []
    for name in names or SUITES:
        if name not in SUITES:
            raise KeyError(name)
        mod = importlib.import_module(f".{name}", __name__)
        out += [c for c in mod.cases() if c.quick or not quick]
    return out
