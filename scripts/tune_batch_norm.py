"""Sweep batch_norm's tuning knobs on a GPU for the training suite's shapes (issue 10).

    PYTHONPATH=src python3 scripts/tune_batch_norm.py [--workers 8] [--reps 20] [--budget 85] [--phases]
        [--only nchw_bf16 ...]

Per shape: float64 reference (F.batch_norm on double copies), then torch's own op (cuDNN) checked
against it (its error on y, dx, dweight, dbias: which side is inaccurate when the bench's check
fails) and timed; then per config: the plan it gives (fused one-launch or two launches, tile,
tiles a program, chunks a channel group, programs), a check of ours against float64, and the
eager fwd+bwd time (median of device-event timings, L2 flushed before each call), torch's time,
the ratio, % of copy bandwidth (fewest bytes: read x, write y, read x and g, write dx, as the
bench counts them) and the host time of one call. A CUDA-graph replay of each config and of
torch gives the kernels' own time (what the bench's graph rows measure); ``--phases`` adds each
launch's kernel time from the profiler (one fwd+bwd, cold L2). One line per (shape, config); a failing
config prints its error and the sweep goes on. Compilation runs first in worker processes (the
kernels land in Triton's disk cache) so that the sweep fits in ~90 s; ``--workers 0`` skips that.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

T0 = time.perf_counter()
BUDGET_S = 85.0

#: name -> (shape, dtype, channels_last), as bench/training.py's batch_norm cases.
SHAPES = {
    "nchw_bf16": ((32, 256, 56, 56), "bfloat16", False),
    "nhwc_bf16": ((32, 256, 56, 56), "bfloat16", True),
    "nchw_fp16": ((256, 64, 112, 112), "float16", False),
    "2d_fp32": ((8192, 1024), "float32", False),
}
#: Knob overrides per shape; {} is the module's default. At most ~6 each (compilation time).
#: What the default gives (132 SMs): nchw_bf16 and nchw_fp16 two launches (16x256 / 4x1024
#: tiles, 8 a program, 4 warps); nhwc_bf16 and 2d_fp32 the grid-wide rows plan (one program an
#: SM, tiles of ROWS_TILE = 8192 elements, 8 warps, cooperative launch; bench, 4c6c377). ``_OFF``:
#: the plans before it (nhwc: two launches; 2-D: fused, one 256x32 tile a program).
_OFF = {"ROWS_CL": False, "ROWS_2D": False}
CONFIGS = {
    "nchw_bf16": [{}, {"FUSED_NCHW": True}],
    # (the rows plan's loops through shared memory, ROWS_STAGES: thirty-seventh session)
    "nhwc_bf16": [{}, {"ROWS_PART_BY_CHUNK": False}, {"ROWS_PHASES": True},
                  {"ROWS_PHASES": True, "ROWS_PART_BY_CHUNK": False}],
    "nchw_fp16": [{}, {"FUSED_NCHW": True}],
    # (the fused one-tile sweep of 4ed5985: 256x32 tiles of 4 warps best; two launches, 4ed5985-a238ac5: 93-156 us
    # against 85 for the fused one-tile plan; the rows plan's tiles, 48706b2: 8192 best of 2048-8192)
    # (forty-second session: warps of the rows plan's one program an SM, at its 16 KB tiles)
    # (fifty-ninth session: L2 eviction policies, ROWS_EVICT, kept; the phases as three launches, ROWS_PHASES:
    # the reduce phases at the cold-read floor; two or four programs a multiprocessor of 4 or 2 warps: slower)
    # (sixty-fifth session: loops over whole tiles unmasked, ROWS_FULL, timed the same and removed; the partials
    # a program's row at a time, ROWS_PART_BY_CHUNK)
    "2d_fp32": [{}, {"ROWS_PART_BY_CHUNK": False}, {"ROWS_PHASES": True},
                {"ROWS_PHASES": True, "ROWS_PART_BY_CHUNK": False}],
}
#: ||ours - float64|| / ||float64|| bound by output dtype (y and dx in the input's dtype, dweight
#: and dbias float32: sums in float32 are good to ~1e-6).
TOL = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-5}


def elapsed() -> float:
    return time.perf_counter() - T0


def inputs(name, device, seed=0):
    """x (needs grad), g, w, b (need grad), running mean and var, as the bench makes them."""
    import torch
    shape, dtype, cl = SHAPES[name]
    gen = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(shape, generator=gen, device=device).to(dt)
    g = torch.randn(shape, generator=gen, device=device).to(dt)
    if cl:
        x, g = x.to(memory_format=torch.channels_last), g.to(memory_format=torch.channels_last)
    C = shape[1]
    w = (torch.rand(C, generator=gen, device=device) + 0.5).requires_grad_()
    b = torch.randn(C, generator=gen, device=device).requires_grad_()
    return x.requires_grad_(), g, w, b, torch.zeros(C, device=device), torch.ones(C, device=device)


def fwd_bwd(fn, x, g, w, b, rm, rv):
    import torch
    y = fn(x, rm, rv, w, b, training=True)
    return (y, *torch.autograd.grad(y, (x, w, b), g))


def _warm(task):
    """Worker: compile (run once) one (shape, config); returns an error line or None."""
    name, cfg = task
    try:
        import torch

        from fastpath.ops import batch_norm as bn
        bn.configure(**{**bn.knobs(), **cfg})
        args = inputs(name, torch.device("cuda"))
        fwd_bwd(bn.batch_norm, *args)
        torch.cuda.synchronize()
        return None
    except Exception as exc:  # noqa: BLE001  # reported by the main process when it runs the config
        return f"{name} {cfg}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def start_precompile(names, workers: int):
    """Compile every (shape, config) in worker processes (spawned, so they hold their own CUDA
    context); returns (pool, pending result) for :func:`finish_precompile`."""
    import multiprocessing as mp
    tasks = [(n, c) for n in names for c in CONFIGS[n]]
    pool = mp.get_context("spawn").Pool(min(workers, len(tasks)))
    return pool, pool.map_async(_warm, tasks), len(tasks)


def finish_precompile(pool, pending, n: int, timeout: float) -> None:
    try:
        bad = [e for e in pending.get(timeout=timeout) if e]
        print(f"# precompiled {n - len(bad)}/{n} configs, {elapsed():.1f} s"
              + "".join(f"\n#   {e}" for e in bad), flush=True)
    except Exception as exc:  # noqa: BLE001  # a timeout or a broken pool: the sweep compiles what is missing
        print(f"# precompile stopped ({type(exc).__name__}: {exc}); going on", flush=True)
    finally:
        pool.terminate()


def rel(a, b) -> float:
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def plan_text(bn, x) -> str:
    """How the default launch path runs ``x``: fused or two launches, tile, chunks, programs."""
    from fastpath.ops import batch_norm_kernel as bnk
    p = bnk._make_plan(x.shape[0], x.shape[1], x.numel() // (x.shape[0] * x.shape[1]),
                       (bnk._strides3(x),) * 3, x.element_size(), x.device)
    if p.rows is not None:
        r = p.rows
        return f"grid-wide rows tile {r.br}x{r.bc} progs {r.programs} w{r.warps} combine {r.cc} ch x {r.kb}"
    gr = p.fused or p.two
    mode = ("fused" + (" 1-tile" if gr.tpk == 1 else f" {gr.tpk}-tile")) if p.fused else f"2-launch {gr.tpk}-tile"
    red = "" if p.fused or p.red is p.two else (
        f" red {p.red.tpk}x{p.red.ba}x{p.red.bb} K {p.red.k} progs {p.red.groups * p.red.k} w{p.red.warps}")
    head = f"{'NCHW' if p.nchw else 'CL'} {mode} tile {gr.ba}x{gr.bb}"
    return f"{head} K {gr.k} progs {gr.groups * gr.k} w{gr.warps}{red}"


def graph_us(call, flush, reps) -> float:
    """Device time of one call captured in a CUDA graph (no host cost)."""
    import torch

    from fastpath.streams import median_ms
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
        call()
    graph.replay()
    torch.cuda.synchronize()
    return 1e3 * median_ms(graph.replay, reps, before=flush)


def phases(call, flush, calls: int = 5) -> list:
    """(kernel, us) of each launch of one call, from the profiler, cold L2: the median over
    ``calls`` calls, each profiled alone."""
    import statistics

    import torch
    from torch.profiler import ProfilerActivity, profile
    runs = []
    for _ in range(calls):
        flush()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        runs.append([(e.name[:24], e.device_time) for e in prof.events()
                     if e.device_time > 0 and e.device_type.name == "CUDA"])
    n = min(len(r) for r in runs)
    return [(runs[0][i][0], round(statistics.median(r[i][1] for r in runs), 1)) for i in range(n)]


def sweep(name, reps, copy_gbps, flush, summary, budget, show_phases) -> None:
    import torch
    import torch.nn.functional as F

    from fastpath.bench.harness import host_us
    from fastpath.ops import batch_norm as bn
    from fastpath.streams import median_ms
    dev = torch.device("cuda")
    defaults = bn.knobs()
    shape, dtype, cl = SHAPES[name]
    args = inputs(name, dev)
    x, g, w, b = args[:4]
    nbytes = 5 * x.numel() * x.element_size()
    # float64 reference and torch's own op
    x64 = x.detach().double().requires_grad_()
    w64, b64 = w.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    y64 = F.batch_norm(x64, None, None, w64, b64, training=True)
    ref = (y64.detach(), *torch.autograd.grad(y64, (x64, w64, b64), g.double()))
    del x64, y64
    theirs = fwd_bwd(F.batch_norm, *args)
    t_err = [rel(a, r) for a, r in zip(theirs, ref)]
    torch_call = lambda: fwd_bwd(F.batch_norm, *args)
    for _ in range(3):
        torch_call()
    torch_us = 1e3 * median_ms(torch_call, reps, before=flush)
    print(f"\n== {name} {tuple(shape)} {dtype}{' channels_last' if cl else ''}: torch {torch_us:.1f} us eager; "
          f"torch vs float64 rel err y {t_err[0]:.1e} dx {t_err[1]:.1e} "
          f"dw {t_err[2]:.1e} db {t_err[3]:.1e}", flush=True)
    best = None
    for i, cfg in enumerate(CONFIGS[name]):
        label = ",".join(f"{k}={v}" for k, v in cfg.items()) or "default"
        if elapsed() > budget:
            print(f"{name:<10} {label:<44} skipped: time budget", flush=True)
            continue
        try:
            bn.configure(**{**defaults, **cfg})
            plan = plan_text(bn, x)
            ours = fwd_bwd(bn.batch_norm, *args)
            errs = [rel(a, r) for a, r in zip(ours, ref)]
            tols = [TOL[dtype], TOL[dtype], TOL["float32"], TOL["float32"]]
            ok = all(e <= t and not math.isnan(e) for e, t in zip(errs, tols))
            check = (f"{'ok' if ok else 'FAIL'} err y {errs[0]:.1e} dx {errs[1]:.1e} dw {errs[2]:.1e} "
                     f"db {errs[3]:.1e} vs ours-torch dw {rel(ours[2], theirs[2]):.1e}")
            if not ok:
                print(f"{name:<10} {label:<44} {plan:<46} {check}", flush=True)
                continue
            call = lambda: fwd_bwd(bn.batch_norm, *args)
            for _ in range(3):
                call()
            us = 1e3 * median_ms(call, reps, before=flush)
            try:
                extra = f" graph {graph_us(call, flush, reps):.1f} us"
            except Exception as exc:  # noqa: BLE001
                extra = f" graph n/a ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
            if show_phases:
                extra += f" phases {phases(call, flush)}"
            pct = 100 * nbytes / (us * 1e-6) / (copy_gbps * 1e9)
            print(f"{name:<10} {label:<44} {plan:<46} ours {us:8.1f} us torch {torch_us:8.1f} us "
                  f"ratio {torch_us / us:5.2f}x copy {pct:5.1f}% host {host_us(call, n=10, warmup=0):6.1f} us{extra} {check}",
                  flush=True)
            if best is None or us < best[0]:
                best = (us, label)
        except Exception as exc:  # noqa: BLE001
            torch.cuda.synchronize()
            print(f"{name:<10} {label:<44} ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                  flush=True)
        finally:
            bn.configure(**defaults)
    try:  # last: a capture that fails (cuDNN's, on some shapes) leaves the context unusable for later ones
        torch_graph = f"{graph_us(torch_call, flush, reps):.1f} us"
    except Exception as exc:  # noqa: BLE001  # not capturable here: shown, not fatal
        torch_graph = f"n/a ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
    print(f"{name:<10} torch graph {torch_graph}" + (f" phases {phases(torch_call, flush)}" if show_phases else ""),
          flush=True)
    if best is not None:
        summary.append(f"{name:<10} best {best[1]:<44} {best[0]:8.1f} us (torch {torch_us:.1f} us, "
                       f"{torch_us / best[0]:.2f}x)")


def copy_bandwidth(dev) -> float:
    """GB/s (read + write) of a 1 GiB device-to-device copy."""
    import torch

    from fastpath.streams import median_ms
    src = torch.empty(1 << 28, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    return 2 * src.nbytes / (median_ms(lambda: dst.copy_(src), 5) * 1e-3) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8, help="processes that compile first (0: none)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per measurement")
    ap.add_argument("--only", nargs="*", choices=list(SHAPES), help="shapes to sweep (default: all)")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds after which configs are skipped")
    ap.add_argument("--phases", action="store_true", help="each launch's kernel time (profiler)")
    opts = ap.parse_args()
    names = opts.only or list(SHAPES)
    pre = start_precompile(names, opts.workers) if opts.workers > 0 else None
    import torch  # while the workers compile

    from fastpath.ops import batch_norm  # noqa: F401
    from fastpath.streams import _flush_buffer
    if pre is not None:
        finish_precompile(*pre, timeout=50.0)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    buf = _flush_buffer(dev)
    flush = lambda: buf.sum()  # reads 2x L2: cold cache, nothing to write back
    copy_gbps = copy_bandwidth(dev)
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, copy {copy_gbps:.0f} GB/s, "
          f"start {elapsed():.1f} s", flush=True)
    summary: list = []
    for name in names:
        sweep(name, opts.reps, copy_gbps, flush, summary, opts.budget, opts.phases)

        torch.cuda.empty_cache()
    print("\n# summary (ratio = torch us / ours us; target >= 1.3x)\n" + "\n".join(summary)
          + f"\n# total {elapsed():.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
