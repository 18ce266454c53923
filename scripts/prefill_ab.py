"""A/B of the prefill attention settings inside the decode engine (one process, alternating):
the defaults against pointer loads with 128 x 64 tiles of 8 warps and the scale applied
before the exponent (the settings before commit 7429cf3). Prints prefill and decode tok/s.

    PYTHONPATH=src python3 scripts/prefill_ab.py [--config qwen3-30b-a3b] [--layers N]
"""
import argparse
import importlib

import torch

from fastpath.engine import bench
from fastpath.models.config import named

AP = importlib.import_module("fastpath.ops.attention_prefill")
NEW = (AP.USE_TMA, dict(AP.TUNED), AP.SOFTMAX_MODE)
OLD = (False, {64: (128, 64, 4, 3), 128: (128, 64, 8, 3), 256: (64, 32, 8, 2)}, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="qwen3-30b-a3b")
    ap.add_argument("--layers", type=int, default=None)
    args = ap.parse_args()
    cfg = named(args.config)
    cfg = cfg.with_layers(args.layers) if args.layers else cfg
    model = bench.random_model(cfg, device=torch.device("cuda"), dtype=torch.bfloat16, fp8=False)
    for name, (tma, tuned, mode) in [("new", NEW), ("old", OLD), ("new", NEW), ("old", OLD)]:
        AP.USE_TMA, AP.SOFTMAX_MODE = tma, mode
        AP.TUNED.clear()
        AP.TUNED.update(tuned)
        r = bench.run(model)
        print(f"{name}: prefill {r['prefill_tps']:8.0f} tok/s  decode {r['decode_tps']:6.1f} tok/s", flush=True)


if __name__ == "__main__":
    main()
