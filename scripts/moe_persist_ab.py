"""The one-token MoE layer (``moe_layer``: router launch, then the experts) with the experts as
the two row kernels or as one persistent launch (``ops.moe_persistent``) and its plan variants:
Qwen3-30B-A3B shapes, bf16 and fp8 experts, each call a CUDA graph replayed with a cold L2,
the variants alternated over rounds in one process; then each variant's output against the
two-kernel one (relative max difference) and the kernel times of one call from the profiler.

    PYTHONPATH=src python3 scripts/moe_persist_ab.py [--rounds 3] [--tokens 1] [--replays]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from moe_profile import TOPK, graph_us, inputs, kernel_times  # noqa: E402

from fastpath._core import memo  # noqa: E402
from fastpath.ops import moe, moe_persistent as MP  # noqa: E402

VARIANTS = {  # name -> knobs of ops.moe_persistent
    "two row kernels": dict(MAX_T=0),
    "persistent 16 x 3, prefetch": dict(MAX_T=8),
    "persistent 16 x 3, no prefetch": dict(MAX_T=8, PREFETCH=0),
    "16 x 3, no prefetch, 168 regs": dict(MAX_T=8, PREFETCH=0, MAXNREG=168),
    "16 x 3, no prefetch, 128 regs": dict(MAX_T=8, PREFETCH=0, MAXNREG=128),
    "16 x 3, prefetch, 168 regs": dict(MAX_T=8, MAXNREG=168),
    "16 x 3, prefetch after, 168 regs": dict(MAX_T=8, PREFETCH=2, MAXNREG=168),
    "8 x 1, no prefetch, 168 regs": dict(MAX_T=8, BLOCK_N=8, SPLITS=1, PREFETCH=0, MAXNREG=168),
}
PROFILED = ("two row kernels", "persistent 16 x 3, no prefetch", "16 x 3, no prefetch, 168 regs")


class GateUpOnly:
    """A stand-in for ``_EXPERTS`` that launches the gate/up part alone (``PHASES`` 1: no
    waits, no down part; the output is not written), to time that part inside the kernel."""

    def __init__(self, inner):
        self.inner, self.fn, self.module = inner, inner.fn, inner.module

    def __getitem__(self, grid):
        return lambda *a, **kw: self.inner[grid](*a, **{**kw, "PHASES": 1})


def resources():
    """(registers, shared bytes, programs resident) of each compiled persistent kernel so far."""
    out = []
    for kernel, _ in MP._EXPERTS.kernels.values():
        kernel._init_handles()
        out.append((kernel.n_regs, kernel.metadata.shared))
    return out, sorted(set(MP._GRIDS.values()))


DEFAULTS = {k: getattr(MP, k) for k in ("MAX_T", "PREFETCH", "BLOCK_N", "SPLITS", "MAXNREG")}


def setting(knobs):
    for k, v in {**DEFAULTS, **knobs}.items():
        setattr(MP, k, v)
    memo.clear_all()  # an eager call replays its launch memo: none from another variant


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=1)
    ap.add_argument("--replays", action="store_true", help="then 2000 replays of one graph, checked")
    a = ap.parse_args()
    for fp8 in (False, True):
        x, router, gu, dn, sc = inputs(a.tokens, fp8)
        fn = lambda: moe.moe_layer(x, router, TOPK, gu, dn, norm_topk_prob=True,  # noqa: E731
                                   gate_up_scale=sc[0], down_scale=sc[1])
        times = {name: [] for name in VARIANTS}
        outs = {}
        for _ in range(a.rounds):
            for name, knobs in VARIANTS.items():
                setting(knobs)
                times[name].append(round(graph_us(fn), 2))
                outs[name] = fn().float()
        setting({})
        base = outs["two row kernels"]
        tag = f"{'fp8' if fp8 else 'bf16'} {a.tokens} token(s)"
        for name in VARIANTS:
            d = float((outs[name] - base).abs().max() / base.abs().max())
            print(f"{tag} {name:<32} graph us {times[name]}  max diff vs two kernels {d:.1e}", flush=True)
        for name in PROFILED:
            setting(VARIANTS[name])
            print(f"{tag} {name} kernel times: {kernel_times(fn)}", flush=True)
            if name != "two row kernels":
                real = MP._EXPERTS
                MP._EXPERTS = GateUpOnly(real)
                try:
                    memo.clear_all()
                    print(f"{tag} {name}, gate/up part alone: {kernel_times(fn)}", flush=True)
                finally:
                    MP._EXPERTS = real
                    memo.clear_all()
        print(f"{tag} compiled (registers, shared bytes); resident programs: {resources()}", flush=True)
        setting({})
    if not a.replays:
        return
    # many replays of one graph: every replay must give the first one's output (counters reset)
    setting(VARIANTS["persistent 16 x 3, prefetch"])
    x, router, gu, dn, sc = inputs(a.tokens, True, seed=1)
    fn = lambda: moe.moe_layer(x, router, TOPK, gu, dn, norm_topk_prob=True,  # noqa: E731
                               gate_up_scale=sc[0], down_scale=sc[1])
    fn(), fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    g.replay()
    first = out.clone()
    bad = 0
    for _ in range(2000):
        g.replay()
        bad += int(not torch.equal(out, first))
    torch.cuda.synchronize()
    print(f"2000 replays of the fp8 persistent layer: {bad} differ from the first", flush=True)
    setting({})


if __name__ == "__main__":
    main()
