"""The 64-token MoE down kernel's blocks beyond moe_profile.py --sweep's (wider output blocks with
8 warps). Run from scripts/: PYTHONPATH=../src FASTPATH_LAUNCH_MEMO=0 python3 moe_down_plans.py"""
import dataclasses

import torch

from fastpath.ops import moe
from fastpath.ops import moe_kernels as MK
from moe_profile import E, H, I, TOPK, dev, inputs, with_plan

T = 64
x, router, gu, dn, sc = inputs(T, False)
w, ids = moe.route(torch.nn.functional.linear(x, router), TOPK, norm_topk_prob=True)
fn = lambda: moe.fused_experts(x, ids, w, gu, dn)  # noqa: E731
base = MK.decode_plan(T, TOPK, E, H, I, dev, 2)
for bn, bk, wp, st in [(128, 64, 4, 3), (256, 64, 8, 3), (256, 32, 8, 3), (256, 64, 8, 4), (256, 128, 8, 2),
                       (128, 64, 8, 3), (128, 128, 8, 3), (512, 32, 8, 3), (256, 64, 4, 3), (128, 64, 4, 3)]:
    p = dataclasses.replace(base, block_n=bn, block_k=bk)
    try:
        us = with_plan(fn, p, {}, dict(num_warps=wp, num_stages=st))
        print(f"down block_n {bn} block_k {bk} warps {wp} stages {st}: experts {us:.1f} us", flush=True)
    except Exception as e:  # out of resources
        print(f"down block_n {bn} block_k {bk} warps {wp} stages {st}: {repr(e)[:100]}", flush=True)
