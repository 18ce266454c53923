"""Sweep the knobs of fastpath.sample's top-k / top-p kernel (mode 2) on a GPU.

Run on the GPU machine from the repository root:

    PYTHONPATH=src python3 scripts/tune_sample.py --json OUT.json [--budget SECONDS] [--quick]

(``TRITON_INTERPRET=1 PYTHONPATH=src python scripts/tune_sample.py --smoke`` runs a tiny
version of the same sweep on the CPU, in Triton's interpreter, to check the script itself.)

Cases: [1, 151936] fp32 top_k=50 top_p=0.9 T=0.7 (the issue's target: 20 us), [1, 151936]
top_k=8, [64, 151936] top_k=50 top_p=0.9, [1, 248320] top_k=50 top_p=0.9 T=0.7; logits are
randn * 3 as in ``python -m fastpath.bench sampling``. Variants of each case: the unpruned
path (``PRUNE=False``), the pruned path with the module's defaults, then the pruned path with
the chunk forced to each of --chunks, ``CAP`` each of --caps and ``num_warps`` each of --warps.

For each variant: tokens against ``reference_sample`` with the same generator seeds (rows x
seeds that differ are counted: 0 expected for float32 data without ties, a rare one can
be a float rounding at a CDF boundary) and against the unpruned path (must be identical:
the same keys reach the same ``_finish``); then the time per call of ``fastpath.sample``
(seed draw + kernel) and of the kernel alone (``_sample_op`` with fixed seeds), each as many
calls captured in one CUDA graph over enough input sets to keep the logits out of L2 (the
benchmark's "graph, cold" mode). Kernels are compiled first by a pool of worker processes
(Triton's disk cache), so the sweep fits its budget. One line per variant; ``--json``
writes the list of results.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch

CASES = [  # (name, shape, temperature, top_k, top_p)
    ("k50 p0.9 T0.7", (1, 151936), 0.7, 50, 0.9),
    ("k8", (1, 151936), 1.0, 8, None),
    ("k50 p0.9 batch64", (64, 151936), 1.0, 50, 0.9),
    ("k50 p0.9 T0.7 v248k", (1, 248320), 0.7, 50, 0.9),
]
SMOKE_CASES = [
    ("k50 p0.9 T0.7", (1, 2000), 0.7, 50, 0.9),
    ("k8", (1, 2000), 1.0, 8, None),
    ("k50 p0.9 batch3", (3, 1000), 1.0, 50, 0.9),
]
SEEDS = 4  # generator seeds checked per variant


def variants(args, case) -> list:
    """(label, knob overrides) of one case: unpruned, pruned defaults, then the sweep."""
    out = [("unpruned", {"PRUNE": False}), ("pruned defaults", {})]
    for chunk in args.chunks:
        for cap in args.caps:
            for nw in args.warps:
                out.append((f"chunk={chunk} cap={cap} warps={nw}",
                            {"MIN_CHUNK": chunk, "MAX_CHUNK": chunk, "CAP": cap, "NUM_WARPS": nw}))
    return out


def make_inputs(shape, device, n_sets: int) -> list:
    out = []
    for s in range(n_sets):
        g = torch.Generator(device=device).manual_seed(s)
        out.append(torch.randn(shape, generator=g, device=device) * 3.0)
    return out


def Knobs(values: dict):
    """Module-level knobs of fastpath.ops.sampling set for a ``with`` block, then restored."""
    from fastpath.bench.harness import knobs
    from fastpath.ops import sampling
    return knobs(sampling, **values)


def config(case, knobs: dict, device) -> dict:
    """The plan and the kernel's constexprs / num_warps a variant gets."""
    from fastpath._core.launch import next_pow2
    from fastpath.ops import sampling
    _, shape, t, k, p = case
    with Knobs(knobs):
        mode, kk = sampling._mode(shape[1], t, k or 0, 1.0 if p is None else p)
        plan = sampling._plan(shape[0], shape[1], next_pow2(kk), mode, device)
        meta = sampling._meta(shape[0], mode, kk, 1.0 if p is None else p, plan) if plan else None
    return {"plan": plan, "meta": meta}


def warm(job) -> str:
    """Worker process: compile one variant's kernel into Triton's disk cache by running it."""
    case, knobs = job
    import fastpath
    _, shape, t, k, p = case
    try:
        x = make_inputs(shape, "cuda", 1)[0]
        with Knobs(knobs):
            fastpath.sample(x, temperature=t, top_k=k, top_p=p)
        torch.cuda.synchronize()
        return ""
    except Exception as exc:  # noqa: BLE001 - reported by the main process
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def compile_all(jobs: list, deadline: float, workers: int) -> dict:
    """Compile every (case, knobs) job in worker processes until ``deadline``; returns
    {job index: error text or '' or 'not compiled in budget'}."""
    import concurrent.futures as cf
    import multiprocessing as mp
    status = {}
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    futs = {pool.submit(warm, job): i for i, job in enumerate(jobs)}
    done, pending = cf.wait(futs, timeout=max(1.0, deadline - time.perf_counter()))
    for f in done:
        status[futs[f]] = f.result()
    for f in pending:
        status[futs[f]] = "not compiled in budget"
    # compiles still running finish in the background; the ones not started are dropped
    pool.shutdown(wait=not pending, cancel_futures=True)
    return status


def graph_us(fn, sets: list, calls: int) -> float:
    """Microseconds per call: at least ``calls`` calls (cycling over ``sets``) in one CUDA
    graph, as the benchmark harness times them."""
    from fastpath.bench.harness import Timer
    timer = Timer(torch.cuda.get_device_properties(0).L2_cache_size)
    return timer.graph_us(fn, [(z,) for z in sets], 2.0 / calls)


def eager_us(fn, sets: list, calls: int) -> float:
    """CPU smoke mode: wall-clock microseconds per call (interpreter: meaningless as speed)."""
    t0 = time.perf_counter()
    for i in range(calls):
        fn(sets[i % len(sets)])
    return 1e6 * (time.perf_counter() - t0) / calls


def run_variant(case, label, knobs, sets, dev, smoke, old_tokens):
    import fastpath
    from fastpath.ops import sampling
    name, shape, t, k, p = case
    row = {"case": name, "shape": list(shape), "temperature": t, "top_k": k, "top_p": p,
           "variant": label, "knobs": knobs, **config(case, knobs, dev)}
    x = sets[0]
    kw = dict(temperature=t, top_k=k, top_p=p)
    with Knobs(knobs):
        tokens, mismatch = [], 0
        for s in range(1 if smoke else SEEDS):
            out = fastpath.sample(x, generator=torch.Generator(device=dev).manual_seed(s), **kw)
            ref = fastpath.reference_sample(x, generator=torch.Generator(device=dev).manual_seed(s), **kw)
            mismatch += int((out != ref).sum())
            tokens.append(out)
        tokens = torch.stack(tokens)
        row["mismatch_vs_reference"] = mismatch
        row["checked"] = (1 if smoke else SEEDS) * shape[0]
        row["same_as_unpruned"] = None if old_tokens is None else bool(torch.equal(tokens, old_tokens))
        seeds = torch.randint(0, 2 ** 62, (shape[0],), device=dev,
                              generator=torch.Generator(device=dev).manual_seed(99))
        tp = 1.0 if p is None else p
        call = lambda z: fastpath.sample(z, **kw)
        kern = lambda z: sampling._sample_op(z, seeds, float(t), int(k or 0), tp)
        timer = eager_us if smoke else graph_us
        n_calls = 1 if smoke else max(len(sets), 100)
        row["call_us"] = timer(call, sets, n_calls)
        row["kernel_us"] = timer(kern, sets, n_calls)
    return row, tokens


def fmt(row) -> str:
    plan = row.get("plan")
    meta = row.get("meta") or {}
    plan_s = "-"
    if plan:
        plan_s = (f"chunk {plan[0]:>5} S {plan[1]:>3} BM {plan[2]:>2} "
                  f"w {meta.get('num_warps', '?'):>2} cap {2 ** meta.get('LOG_CAP', 0):>3}")
    if "error" in row:
        return f"{row['case']:<22} {row['variant']:<30} {plan_s:<42} {row['error']}"
    same = {None: "", True: "same", False: "DIFFERS"}[row["same_as_unpruned"]]
    return (f"{row['case']:<22} {row['variant']:<30} {plan_s:<42} {row['call_us']:8.1f} "
            f"{row['kernel_us']:8.1f}  ref {row['mismatch_vs_reference']}/{row['checked']} {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the list of results here")
    ap.add_argument("--budget", type=float, default=100.0,
                    help="seconds after which no new variant starts (compiling: 60%% of it)")
    ap.add_argument("--chunks", type=lambda s: [int(v) for v in s.split(",")], default=[1024, 2048, 4096])
    ap.add_argument("--caps", type=lambda s: [int(v) for v in s.split(",")], default=[128, 256, 512])
    ap.add_argument("--warps", type=lambda s: [int(v) for v in s.split(",")], default=[4, 8])
    ap.add_argument("--quick", action="store_true", help="the target case only")
    ap.add_argument("--workers", type=int, default=0, help="compile processes (0: cores - 2, at most 16)")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes (with TRITON_INTERPRET=1)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    import triton

    import fastpath  # noqa: F401
    from fastpath.ops import sampling
    dev = torch.device("cpu" if args.smoke else "cuda")
    cases = SMOKE_CASES if args.smoke else CASES
    if args.smoke:
        args.chunks, args.caps, args.warps = [64, 256], [32, 64], [4]
    if args.quick:
        cases = cases[:1]
    name = "CPU (interpreter)" if args.smoke else torch.cuda.get_device_name(dev)
    knobs = ("PRUNE", "MIN_CHUNK", "MAX_CHUNK", "CAP", "MERGE_GROUPS", "MERGE_TILE", "MERGE_DEPTH",
             "BLOCK_ELEMS", "NUM_WARPS")
    print(f"{name}, torch {torch.__version__}, triton {triton.__version__}; defaults: "
          + ", ".join(f"{k}={getattr(sampling, k)}" for k in knobs), flush=True)
    # every case's unpruned and default variants first, then the sweeps (budget permitting)
    order = [(c, v) for c in range(len(cases)) for v in (0, 1)]
    order += [(c, v) for c in range(len(cases)) for v in range(2, len(variants(args, cases[c])))]
    status = {}  # (case, variant) -> compile error text, '' when compiled
    if not args.smoke:
        workers = args.workers or max(1, min(16, (os.cpu_count() or 4) - 2))
        jobs = [(cases[c], variants(args, cases[c])[v][1]) for c, v in order]
        done = compile_all(jobs, t0 + 0.6 * args.budget, workers)
        status = {order[i]: err for i, err in done.items()}
        print(f"compiled {sum(v == '' for v in status.values())}/{len(jobs)} variants with "
              f"{workers} processes in {time.perf_counter() - t0:.1f} s", flush=True)
    print(f"{'case':<22} {'variant':<30} {'plan':<42} {'call us':>8} {'kern us':>8}  check")
    sets, old_tokens, results = {}, {}, {}
    for c, v in order:
        case = cases[c]
        shape = case[1]
        label, kn = variants(args, case)[v]
        if c not in sets:
            l2 = 0 if args.smoke else torch.cuda.get_device_properties(dev).L2_cache_size
            n_sets = 1 if args.smoke else min(256, math.ceil(2 * l2 / (shape[0] * shape[1] * 4)) + 1)
            sets[c] = make_inputs(shape, dev, n_sets)
        err = status.get((c, v), "")
        if err or time.perf_counter() > t0 + args.budget:
            row = {"case": case[0], "shape": list(shape), "variant": label, "knobs": kn,
                   **config(case, kn, dev), "error": f"skipped: {err or 'time budget spent'}"}
        else:
            try:
                row, tokens = run_variant(case, label, kn, sets[c], dev, args.smoke,
                                          old_tokens.get(c))
                if label == "unpruned":
                    old_tokens[c] = tokens
            except Exception as exc:  # noqa: BLE001 - one failing variant must not stop the sweep
                row = {"case": case[0], "shape": list(shape), "variant": label, "knobs": kn,
                       "error": f"FAILED: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
                if dev.type == "cuda":
                    torch.cuda.synchronize()
        results[c, v] = row
        print(fmt(row), flush=True)
    sets.clear()
    rows = [results[key] for key in sorted(results)]
    print("\nfastest correct variant per case (call us, kernel us):")
    for case in cases:
        good = [r for r in rows if r["case"] == case[0] and "error" not in r
                and r["same_as_unpruned"] is not False]
        if good:
            best = min(good, key=lambda r: r["call_us"])
            old = [r for r in good if r["variant"] == "unpruned"]
            ratio = f"  ({old[0]['call_us'] / best['call_us']:.2f}x the unpruned path)" if old else ""
            print(f"  {case[0]:<22} {best['variant']:<30} {best['call_us']:7.1f} "
                  f"{best['kernel_us']:7.1f}{ratio}")
    if args.json:
        meta = {"gpu": name, "torch": torch.__version__, "triton": triton.__version__,
                "median_of": 7, "date": time.strftime("%Y-%m-%dT%H:%M:%S")}
        with open(args.json, "w") as f:
            json.dump([dict(r, **meta) for r in rows], f, indent=1, default=str)
        print(f"wrote {len(rows)} results to {args.json}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
