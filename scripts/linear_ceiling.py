"""GPU probe: how fast could any kernel be on issue 3's benchmark rows? For every bf16 ``linear``
row of the bench (1 / 4 / 16 rows x the issue's seven K x N) and the ``scaled_mm`` rows at
M <= 16, timed as the bench's graph rows are (cold L2: one CUDA graph of many calls rotating over
inputs that span more than 2x the L2, divided by the calls), in one process:

* ``torch``: F.linear / torch._scaled_mm, as the bench's rows;
* ``ours``: fastpath, as the bench's rows;
* ``read``: the fastest of a sweep of read-only Triton kernels over the weight's bytes alone
  (no activations, no output, one int32 sum a program), launched as fastpath's kernels are
  (programmatic dependent launches: a call's ramp overlaps the previous call's tail).

A kernel that must read the weights once takes at least ``min(read, ours)``, so
``torch / min(read, ours)`` is the most any kernel can gain on that row, and the geometric mean
of those ceilings bounds the issue's "1.3x (geometric mean)". ``empty``: the read kernel as one
program over one word, the per-call cost no kernel avoids.

    PYTHONPATH=src python3 scripts/linear_ceiling.py [--json OUT] [--quick]
"""
import argparse
import json
import math
import os
import sys

import torch
import triton
import triton.language as tl

from fastpath._core.launch import Launcher

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_bandwidth import _read_kernel  # noqa: E402  (the bare read, here over int32 words)

_READ = Launcher(_read_kernel, pdl=True)
#: (programs an SM, int32 words a program reads a step, warps)
PLANS = [(p, b, w) for p in (2, 4, 8, 16, 32) for b in (512, 1024, 2048, 4096) for w in (4, 8)]


def words_of(t: torch.Tensor) -> torch.Tensor:
    """The int32 words of ``t``'s whole storage (a transposed view reads the same bytes)."""
    st = t.untyped_storage()
    return torch.empty(0, dtype=torch.int32, device=t.device).set_(st, 0, (st.nbytes() // 4,))


def reader(plan, sms: int):
    p, block, warps = plan
    outs = {}

    def read(w: torch.Tensor):
        n = w.numel()
        grid = min(sms * p, triton.cdiv(n, block))
        per_prog = triton.cdiv(triton.cdiv(n, grid), block) * block
        grid = triton.cdiv(n, per_prog)
        out = outs.get(grid)
        if out is None:
            out = outs[grid] = torch.empty(grid, dtype=torch.int32, device=w.device)
        _READ[(grid,)](w, out, n, per_prog, BLOCK=block, ACC=tl.int32, num_warps=warps)
    return read


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="append a record a row to this JSON-lines file")
    ap.add_argument("--quick", action="store_true", help="one row count and a few read plans")
    args = ap.parse_args()
    from fastpath.bench import fp8 as fp8_bench
    from fastpath.bench import linear as linear_bench
    from fastpath.bench.harness import Timer, measure_ceilings
    ceil = measure_ceilings()
    timer = Timer(ceil["l2_bytes"])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}; copy "
          f"{ceil['copy_gbps']:.0f} GB/s, L2 {ceil['l2_bytes'] >> 20} MiB", flush=True)
    cases = [c for c in linear_bench.cases() if c.name == "linear bf16"]
    cases += [c for c in fp8_bench.cases() if c.shape[0] <= 16]
    if args.quick:
        cases = [c for c in cases if c.shape[0] == 1]
    plans = PLANS[::7] if args.quick else PLANS
    dev = torch.device("cuda")
    one = torch.zeros(1, dtype=torch.int32, device=dev)
    empty = reader((1, 1024, 4), sms)
    empty_us = timer.graph_us(lambda: empty(one), [()], 0.005)
    print(f"empty one-program kernel: {empty_us:.2f} us a call", flush=True)
    floors: dict = {}  # weight bytes -> (us, plan)
    rows = []
    for case in cases:
        sets = [case.make(case.shape, case.dtype, dev, 0)]
        per_set = sum(t.nbytes for t in sets[0])
        sets += [case.make(case.shape, case.dtype, dev, s)
                 for s in range(1, min(512, math.ceil(2 * timer.l2 / per_set) + 1))]
        weights = [words_of(max(s, key=lambda t: t.nbytes)) for s in sets]
        wbytes = weights[0].nbytes
        est = timer.estimate_ms(case.native, sets[0])
        torch_us = timer.graph_us(case.native, sets, est)
        ours_us = timer.graph_us(case.ours, sets, est)
        if wbytes not in floors:
            best = None
            for plan in plans:
                read = reader(plan, sms)
                us = timer.graph_us(read, [(w,) for w in weights], est)
                if best is None or us < best[0]:
                    best = (us, plan)
            floors[wbytes] = best
        read_us, plan = floors[wbytes]
        row = {"case": case.name, "shape": list(case.shape), "weight_bytes": wbytes, "torch_us": torch_us,
               "ours_us": ours_us, "read_us": read_us, "read_plan": list(plan),
               "ratio": torch_us / ours_us, "ceiling": torch_us / min(read_us, ours_us),
               "read_pct_copy": 100 * wbytes / read_us / 1e3 / ceil["copy_gbps"],
               "ours_pct_copy": 100 * case.nbytes(case.shape, 2) / ours_us / 1e3 / ceil["copy_gbps"],
               "empty_us": empty_us, "copy_gbps": ceil["copy_gbps"], "gpu": torch.cuda.get_device_name(0)}
        rows.append(row)
        print(f"{case.name:<22} {'x'.join(map(str, case.shape)):<14} torch {torch_us:8.2f}  ours {ours_us:8.2f} "
              f"({row['ratio']:.2f}x, {row['ours_pct_copy']:5.1f}% of copy)  read {read_us:8.2f} "
              f"({row['read_pct_copy']:5.1f}%, plan {plan})  ceiling {row['ceiling']:.2f}x", flush=True)
    for name in sorted({r["case"] for r in rows}):
        for m in sorted({r["shape"][0] for r in rows if r["case"] == name}):
            sel = [r for r in rows if r["case"] == name and r["shape"][0] == m]
            gm = lambda key: math.exp(sum(math.log(r[key]) for r in sel) / len(sel))  # noqa: E731
            print(f"geomean {name}, {m} rows ({len(sel)} shapes): ours {gm('ratio'):.3f}x, "
                  f"ceiling {gm('ceiling'):.3f}x", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
