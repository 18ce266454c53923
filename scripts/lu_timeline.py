"""The GPU timeline of one blocked lu_factor (launches issued directly, no CUDA graph): every
kernel's stream, start and duration from the PyTorch profiler, so that a panel launch's own time,
the steps beside it on the second stream and the gaps between launches can be read apart (the
critical path is the main stream's panels plus its waits). ``--set`` knobs of
:mod:`fastpath.ops.linalg.lu` per variant, e.g. ``--variant "BLOCKED_LOOKAHEAD='kernel'"`` times the
panel launches without the fused look-ahead step. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/lu_timeline.py [--dtype complex64] [--n 256] [--batch 64] \
        [--variant "KNOB=V KNOB=V"]... [--trace DIR]
"""
import argparse
import ast
import json
import os
import re
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

from fastpath.bench.harness import knobs
from fastpath.ops.linalg import lu
from fastpath.streams import _flush_buffer

ap = argparse.ArgumentParser()
ap.add_argument("--dtype", default="complex64")
ap.add_argument("--n", type=int, default=256)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--variant", action="append", default=[], help="space-separated NAME=VALUE knobs of lu")
ap.add_argument("--trace", default=None, help="keep each variant's chrome trace in this folder")
ap.add_argument("--list", action="store_true", help="print every kernel, not only the summary")
args = ap.parse_args()
dev = torch.device("cuda")
flush = _flush_buffer(dev)
dtype = getattr(torch, args.dtype)
a = torch.randn(args.batch, args.n, args.n, generator=torch.Generator(device=dev).manual_seed(0), device=dev,
                dtype=dtype)
if lu._path(args.n, args.n, args.batch, dtype) != "blocked":
    raise SystemExit(f"{args.batch}x{args.n}x{args.n} {args.dtype} takes torch's path (lu._path): no timeline")
LU = torch.empty_like(a)
piv = torch.empty(args.batch, args.n, dtype=torch.int32, device=dev)
info = torch.empty(args.batch, dtype=torch.int32, device=dev)


def short(name: str) -> str:
    for key, tag in (("_lu_kernel", "panel"), ("_lu_step_kernel", "step"), ("_lu_left_swaps", "left"),
                     ("copy", "copy"), ("elementwise", "copy")):
        if key in name:
            return tag
    return re.sub(r"\W+", "_", name)[:24]


def timeline(label: str):
    for _ in range(3):
        lu._launch(a, LU, piv, info)
    torch.cuda.synchronize()
    flush.sum()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        lu._launch(a, LU, piv, info)
        torch.cuda.synchronize()
    path = os.path.join(args.trace or tempfile.mkdtemp(), re.sub(r"\W+", "_", label)[:80] + ".json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    events.sort(key=lambda e: e["ts"])
    t0 = events[0]["ts"]
    end = max(e["ts"] + e["dur"] for e in events)
    streams = sorted({e["args"].get("stream") for e in events})
    main = events[0]["args"].get("stream")
    print(f"== {label}: span {end - t0:.1f} us, streams {streams}")
    tot: dict = {}
    for e in events:
        tag, s = short(e["name"]), e["args"].get("stream")
        key = (tag, "main" if s == main else f"s{s}")
        n, d = tot.get(key, (0, 0.0))
        tot[key] = (n + 1, d + e["dur"])
        if args.list:
            print(f"  {key[1]:>5} {tag:<8} start {e['ts'] - t0:8.1f} dur {e['dur']:7.1f}")
    for (tag, s), (n, d) in sorted(tot.items()):
        print(f"  {s:>5} {tag:<8} x{n:<3} total {d:8.1f} us  mean {d / n:7.1f}")
    panels = [e for e in events if short(e["name"]) == "panel"]
    gaps = [b["ts"] - (p["ts"] + p["dur"]) for p, b in zip(panels, panels[1:])]
    print("  panel durations:", " ".join(f"{p['dur']:.1f}" for p in panels))
    print("  gaps after each panel:", " ".join(f"{g:.1f}" for g in gaps))


for v in args.variant or [""]:
    sets = {}
    for kv in v.split():
        name, value = kv.split("=", 1)
        sets[name] = ast.literal_eval(value)
    with knobs(lu, **sets):
        timeline(f"{args.dtype} {args.batch}x{args.n}x{args.n} {v or 'default'}")
