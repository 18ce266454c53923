"""GPU sweep of the split-KV decode kernel's knobs (KV tile, programs per SM, smallest split,
pipeline stages) on the attention bench's decode shapes: each
variant checked against float64 PyTorch, then timed as the bench's graph/cold mode does
(many calls in one CUDA graph over input sets cycled past L2), next to
F.scaled_dot_product_attention. One line per (shape, variant); JSON lines to --json.

Usage (repo root, GPU machine): PYTHONPATH=src python3 scripts/tune_attention.py --json out.jsonl [--variants JSON]
"""
import argparse
import itertools
import json

import torch
import torch.nn.functional as F

from fastpath.bench.attention import _bytes, _inputs
from fastpath.bench.harness import Timer, knobs
from fastpath.ops import attention as A

SHAPES = [(1, 32, 8, 1, 1024, 128), (1, 32, 8, 1, 8192, 128), (1, 32, 8, 1, 32768, 128),
          (1, 16, 2, 1, 8192, 256), (1, 32, 4, 1, 640, 128)]  # last: Qwen3-30B-A3B at the decode bench's mean context
def variants():
    yield {}
    for bn, pps, mkv in itertools.product((64, 128), (1, 2, 4), (128, 512)):
        yield {"BLOCK_N": bn, "PROGRAMS_PER_SM": pps, "MIN_KV_PER_SPLIT": mkv}
    for st in (2, 4):
        yield {"NUM_STAGES": st}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="tune_attention.jsonl")
    ap.add_argument("--variants", help='a JSON list of knob dicts to try instead of the sweep, e.g. \'[{}, {"MIN_KV_PER_SPLIT": 64}]\'')
    args = ap.parse_args()
    todo = json.loads(args.variants) if args.variants else list(variants())
    dev = torch.device("cuda")
    timer = Timer(torch.cuda.get_device_properties(0).L2_cache_size)
    copy_gbps = 4250.0
    with open(args.json, "a") as out:
        for shape in SHAPES:
            per = _bytes(shape, 2)
            sets = [_inputs(shape, "bfloat16", dev, s) for s in range(min(64, 2 * timer.l2 // per + 2))]
            q, k, v = sets[0]
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True)
            t_torch = timer.graph_us(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                                     sets, 0.02)
            for var in todo:
                try:
                    with knobs(A, **var):
                        fn = A.scaled_dot_product_attention
                        o = fn(q, k, v, enable_gqa=True).double()
                        err = ((o - ref).norm() / ref.norm()).item()
                        us = timer.graph_us(lambda q, k, v: fn(q, k, v, enable_gqa=True), sets, 0.02)
                    rec = {"shape": shape, "var": var, "err": err, "us": us, "torch_us": t_torch,
                           "ratio": t_torch / us, "pct_copy": 100 * per / us / 1e3 / copy_gbps}
                except Exception as exc:  # noqa: BLE001 - a variant that fails is reported
                    rec = {"shape": shape, "var": var, "error": f"{type(exc).__name__}: {exc}"[:200]}
                    torch.cuda.synchronize()
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
            del sets


if __name__ == "__main__":
    main()
