"""The MoE decode kernels' token tiles at 64 tokens (Qwen3-30B-A3B shapes, bf16 experts): every
token in one 64-row tile (the default), the routed tokens compacted into 16-row tiles
(``moe_kernels.COMPACT``) with the grid's spare tiles (idle programs) or without them (one tile;
right only while no expert gets more than 16 tokens, as with these random routings), and the
compacted scan on one 64-row tile. Per-kernel times from the profiler, the experts in a graph.

    PYTHONPATH=src FASTPATH_LAUNCH_MEMO=0 python3 scripts/moe_tile_probe.py [--tokens 64]
"""
import argparse
import dataclasses

import torch

from fastpath.ops import moe
from fastpath.ops import moe_kernels as MK
from moe_profile import E, TOPK, graph_us, inputs, kernel_times

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", type=int, default=64)
T = ap.parse_args().tokens
x, router, gu, dn, sc = inputs(T, False)
w, ids = moe.route(torch.nn.functional.linear(x, router), TOPK, norm_topk_prob=True)
print("most tokens on one expert:", int(torch.bincount(ids.flatten(), minlength=E).max()))
fn = lambda: moe.fused_experts(x, ids, w, gu, dn)  # noqa: E731
ref = moe.reference_fused_experts(x, ids, w, gu, dn).float()
plan, cdiv = MK.decode_plan, moe.cdiv
variants = {
    "64-row tiles of every token": dict(compact=False),
    "compacted 16-row tiles, spare tiles in the grid": dict(compact=True),
    "compacted 16-row tiles, one tile": dict(compact=True, one=True),
    "compacted scan, one 64-row tile": dict(compact=True, wide=True),
}
for name, v in variants.items():
    MK.COMPACT = v["compact"]
    if v.get("wide"):
        MK.decode_plan = lambda *a, **k: dataclasses.replace(plan(*a, **k), block_t=64)
    moe.cdiv = (lambda a, b: 1 if b in (16, 64) and a == T else cdiv(a, b)) if v.get("one") or v.get("wide") else cdiv
    try:
        out = fn().float()
        err = float((out - ref).abs().max() / ref.abs().max())
        kt = {k: v for k, v in kernel_times(fn).items() if "_gate_up" in k or "_down" in k}
        print(f"{name:<50} experts {graph_us(fn):7.1f} us (graph)  kernels {kt}  max rel err {err:.1e}", flush=True)
    finally:
        MK.decode_plan, moe.cdiv, MK.COMPACT = plan, cdiv, True
