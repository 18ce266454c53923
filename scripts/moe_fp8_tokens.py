"""fp8 experts on the three decode kernels (9 to 64 tokens), Qwen3-30B-A3B shapes: x scaled to
float16 once per call (``moe.PRESCALE_MIN_BLOCK_T``) or in every gate/up tile, against bf16
experts; CUDA graphs, cold L2. (At a61a678 it also timed a float16 route for the down
projection, each h tile scaled: within noise of the bfloat16 one, removed; at f77606d the
transposed dots, slower at every plan, removed.) Run on a GPU machine with the launch memo off
(it would replay one variant):

    PYTHONPATH=src FASTPATH_LAUNCH_MEMO=0 python3 scripts/moe_fp8_tokens.py [--json OUT]
"""
import argparse
import json
import sys

import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from moe_profile import TOPK, graph_us, inputs  # noqa: E402

from fastpath.ops import moe  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    rec = {}
    for T in (16, 32, 64):
        for fp8 in (False, True):
            x, router, gu, dn, sc = inputs(T, fp8)
            w, ids = moe.route(F.linear(x, router), TOPK, norm_topk_prob=True)
            fn = lambda: moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=sc[0], down_scale=sc[1])  # noqa: E731
            want = fn().float()
            for pre in (16, 128) if fp8 else (128,):
                moe.PRESCALE_MIN_BLOCK_T = pre
                err = ((fn().float() - want).norm() / want.norm()).item()
                name = f"T={T} {'fp8' if fp8 else 'bf16'} prescale={pre <= 64:d}"
                rec[name] = dict(us=graph_us(fn), rel_to_first=err)
                print(name, rec[name], flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
