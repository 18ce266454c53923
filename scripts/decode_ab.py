"""A/B of launch settings inside the decode engine (one process, variants alternated, two
rounds): the early launch of the kernel after an RMSNorm or an attention combine
(``Launcher(early=True)``) and the matrix-vector kernel's L2 prefetch before it waits
(``matvec.PREFETCH_BYTES``), each on and off. Prints decode tok/s per variant and round.

    PYTHONPATH=src python3 scripts/decode_ab.py [--config qwen3-8b qwen3-30b-a3b] [--layers N] [--json OUT]
"""
import argparse
import json

import torch

from fastpath.engine import bench
from fastpath.models.config import named
from fastpath.ops import attention, matvec, norm

EARLY = (norm._KERNEL, attention._COMBINE)
PREFETCH = matvec.PREFETCH_BYTES


def setting(early: bool, prefetch: bool) -> None:
    for launcher in EARLY:
        launcher.early = early
    matvec.PREFETCH_BYTES = PREFETCH if prefetch else 0


VARIANTS = {"early + prefetch": (True, True), "neither": (False, False), "early only": (True, False),
            "prefetch only": (False, True)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", nargs="+", default=["qwen3-8b", "qwen3-30b-a3b"])
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for name in args.config:
        cfg = named(name)
        cfg = cfg.with_layers(args.layers) if args.layers else cfg
        model = bench.random_model(cfg, device=torch.device("cuda"), dtype=torch.bfloat16, fp8=False)
        for rnd in range(2):
            for var, (early, prefetch) in VARIANTS.items():
                setting(early, prefetch)
                r = bench.run(model)
                rows.append({"config": name, "variant": var, "round": rnd, "decode_tps": r["decode_tps"]})
                print(f"{name:16s} {var:18s} round {rnd}: decode {r['decode_tps']:6.1f} tok/s", flush=True)
        setting(True, True)
        del model
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
