"""One call each of the one-token MoE experts (router + fused_experts through ``moe_layer``,
Qwen3-30B-A3B shapes) in bf16 and in fp8, for a profiler that takes one launch of each kernel
(``ncu -k "regex:_gate_up_rows|_down_rows" -c 4``).

    PYTHONPATH=src python3 scripts/moe_rows_once.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from moe_profile import TOPK, inputs  # noqa: E402

from fastpath.ops import moe  # noqa: E402

for fp8 in (False, True):
    x, router, gu, dn, sc = inputs(1, fp8)
    moe.moe_layer(x, router, TOPK, gu, dn, norm_topk_prob=True, gate_up_scale=sc[0], down_scale=sc[1])
    torch.cuda.synchronize()
    print(f"{'fp8' if fp8 else 'bf16'}: one call done", flush=True)
