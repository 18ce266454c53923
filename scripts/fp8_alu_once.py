"""One call each of the one-token MoE experts (router + fused_experts through ``moe_layer``,
Qwen3-30B-A3B shapes) in bf16 and in fp8 with each fp8 load mode, for a profiler that takes
one launch of each kernel (``ncu -k "regex:_gate_up_rows|_down_rows" -c 6``): bf16, fp8
converted by the hardware ("native"), fp8 decoded on the integer / float32 units ("alu").

    PYTHONPATH=src python3 scripts/fp8_alu_once.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from moe_profile import TOPK, inputs  # noqa: E402

from fastpath.ops import moe  # noqa: E402

for fp8, mode in ((False, None), (True, "native"), (True, "alu")):
    moe.FP8_DECODE = mode
    x, router, gu, dn, sc = inputs(1, fp8)
    moe.moe_layer(x, router, TOPK, gu, dn, norm_topk_prob=True, gate_up_scale=sc[0], down_scale=sc[1])
    torch.cuda.synchronize()
    print(f"{'fp8 ' + mode if fp8 else 'bf16'}: one call done", flush=True)
moe.FP8_DECODE = None
