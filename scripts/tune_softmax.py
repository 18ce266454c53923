"""GPU sweep of softmax split plans (chunk, chunks a row, warps) on the issue's shapes:
correctness against float64, then time per call as the benchmark harness measures it
(graph: many calls in one CUDA graph, cold = inputs cycled past L2; eager cold for the big
shape). Prints one line per plan and writes JSON lines to --json.

Usage (repo root, GPU machine): python scripts/tune_softmax.py --json out.jsonl [--rows 64]
"""
import argparse
import json

import torch

from fastpath.bench.harness import Timer, knobs
from fastpath.ops import softmax as sm


def plans_for(rows, n):
    """((chunk, chunks a row, warps), module knobs) pairs to try."""
    sizes = (2048, 4096) if rows == 1 else (16384, 8192, 4096)
    plans = [(c, -(-n // c), w) for c in sizes for w in (4, 8)]
    two = [(p, {"FUSED": False}) for p in plans] if rows > 1 else []  # reduce, then normalise (x re-read from L2)
    return [(p, {}) for p in plans] + [(p, {"FLAGGED": False}) for p in plans] + two


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="tune_softmax.jsonl")
    ap.add_argument("--rows", type=int, default=None, help="only the shape with this many rows (1, 64 or 16384)")
    args = ap.parse_args()
    timer = Timer(torch.cuda.get_device_properties(0).L2_cache_size)
    dev = torch.device("cuda")
    out = open(args.json, "a")
    for rows, n in [(1, 128256), (64, 128256), (16384, 131072)]:
        if args.rows is not None and rows != args.rows:
            continue
        big = rows * n > 2**28
        n_sets = 1 if big else max(2, 2 * timer.l2 // (rows * n * 4) + 1)
        sets = [(torch.randn(rows, n, device=dev) * 3,) for _ in range(n_sets)]
        ref = torch.softmax(sets[0][0][:64].double(), -1)
        for log in (False, True) if rows == 1 else (False,):
            native = torch.log_softmax if log else torch.softmax
            fns = [("torch", None, lambda x: native(x, -1)), ("default", None, lambda x: sm._launch(x, log, x.dtype))]
            for p, values in plans_for(rows, n):
                def fn(x, p=p, values=values):
                    with knobs(sm, **values):
                        return sm._launch(x, log, x.dtype, plan=p)
                fns.append((f"{p} {values}", p, fn))
            for name, p, fn in fns:
                try:
                    y = fn(sets[0][0])[:64].double()
                    r = ref.log() if log else ref
                    err = ((y - r).norm() / r.norm()).item()
                    if big:
                        us = timer.eager_us(fn, sets[0], False, 5.0)
                        modes = {"eager_cold": us}
                    else:
                        modes = {"graph_cold": timer.graph_us(fn, sets, 0.01),
                                 "graph_hot": timer.graph_us(fn, sets[:1], 0.01)}
                    rec = dict(rows=rows, n=n, log=log, plan=name, err=err, **modes)
                except Exception as exc:  # a plan that does not compile or fit
                    rec = dict(rows=rows, n=n, log=log, plan=name, error=f"{type(exc).__name__}: {exc}"[:200])
                    torch.cuda.synchronize()
                gbps = {k: 2 * rows * n * 4 / v / 1e3 for k, v in rec.items() if k.startswith(("graph", "eager"))}
                print(json.dumps(rec), {k: round(v) for k, v in gbps.items()}, flush=True)
                out.write(json.dumps(rec) + "\n")
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
