"""What the decode engine's side stream for token read-back gains: decode tok/s with the
copies on a side stream and on the compute stream, alternated in one process (5 runs each,
median) for the embedded default model and named configs with random weights.

Usage (repo root, GPU machine): PYTHONPATH=src python3 scripts/side_stream_gain.py [--json PATH]
"""
import argparse
import json
import statistics

import torch

from fastpath.engine import bench
from fastpath.engine.commands import DEFAULT_MODEL
from fastpath.models.config import named
from fastpath.models.loader import load


def models():
    yield "embedded default", lambda: load(DEFAULT_MODEL, device="cuda", dtype=torch.bfloat16, progress=False)
    for name in ("lfm2.5-8b-a1b", "qwen3-8b"):
        yield name, lambda name=name: bench.random_model(named(name), device="cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for name, make in models():
        model = make()
        tps = {True: [], False: []}
        for _ in range(5):
            for side in (True, False):
                tps[side].append(bench.run(model, prompt_len=512, new_tokens=256, side_stream=side)["decode_tps"])
        on, off = statistics.median(tps[True]), statistics.median(tps[False])
        row = {"model": name, "side_stream_tps": on, "inline_tps": off, "gain": on / off,
               "runs": {"side": tps[True], "inline": tps[False]}}
        print(f"{name:20s} side stream {on:8.1f} tok/s  inline {off:8.1f} tok/s  gain {on / off:.4f}x "
              f"(spread side {min(tps[True]):.1f}-{max(tps[True]):.1f}, inline {min(tps[False]):.1f}-{max(tps[False]):.1f})",
              flush=True)
        rows.append(row)
        del model
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
