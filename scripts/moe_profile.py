"""Where the one-token MoE layer's time goes, and a block-size sweep of its decode kernels.

Qwen3-30B-A3B shapes (128 experts, top-8, hidden 2048, width 768), bf16 and fp8 experts.
Per kernel device time from the profiler (eager, L2 flushed before each call), then the
layer and each configuration in a CUDA graph replayed with a cold L2. Run on a GPU machine:

    PYTHONPATH=src FASTPATH_LAUNCH_MEMO=0 python3 scripts/moe_profile.py
        [--sweep | --rows | --router | --fixed [--parts]]
        [--tokens T] [--dtypes bf16,fp8] [--budget SECONDS] [--json OUT]

(the launch memo off for --sweep: it would replay the default plan at every point)
"""
import argparse
import contextlib
import dataclasses
import itertools
import json
import time
from unittest.mock import patch

import torch
import torch.nn.functional as F

from fastpath.bench import harness
from fastpath.ops import moe
from fastpath.ops import moe_kernels as K
from fastpath.streams import _flush_buffer, median_ms

dev = torch.device("cuda")
flush = _flush_buffer(dev)
H, I, E, TOPK = 2048, 768, 128, 8


def inputs(T, fp8, seed=0, h=H, i=I):
    g = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn(T, h, generator=g, device=dev).bfloat16()
    router = (torch.randn(E, h, generator=g, device=dev) * h ** -0.5).bfloat16()
    gu = (torch.randn(E, 2 * i, h, generator=g, device=dev) * h ** -0.5).bfloat16()
    dn = (torch.randn(E, h, i, generator=g, device=dev) * i ** -0.5).bfloat16()
    scales = (None, None)
    if fp8:
        (gu, sgu), (dn, sd) = moe.quantize_experts(gu), moe.quantize_experts(dn)
        scales = (sgu, sd)
    return x, router, gu, dn, scales


def layer(x, router, gu, dn, scales):
    w, ids = moe.route(F.linear(x, router), TOPK, norm_topk_prob=True)
    return moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=scales[0], down_scale=scales[1])


def graph_us(fn, reps=30):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(), fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    return 1e3 * median_ms(g.replay, reps, before=lambda: flush.sum())


def kernel_times(fn, reps=10):
    """Average us per call of each kernel ``fn`` runs (the L2 flush ahead of each call too)."""
    fn()
    torch.cuda.synchronize()
    times = harness.kernel_times(fn, reps, before=lambda: flush.sum())
    return {name[:60]: round(us, 2) for name, (us, calls) in times.items() if calls >= 1}


class Staged:
    """A launcher shim that adds num_stages / num_warps to every launch."""

    def __init__(self, inner, **opts):
        self.inner, self.opts = inner, opts

    def __getitem__(self, grid):
        def go(*a, **kw):
            kw.update(self.opts)
            return self.inner[grid](*a, **kw)
        return go


def with_plan(fn, plan, gu_opts, dn_opts):
    """The three decode kernels (one token would take the row kernels) with ``plan``."""
    orig = (K.decode_plan, moe._GATE_UP, moe._DOWN, K.ROWS_MAX_T)
    K.decode_plan, K.ROWS_MAX_T = (lambda *a, **k: plan), 0
    moe._GATE_UP, moe._DOWN = Staged(orig[1], **gu_opts), Staged(orig[2], **dn_opts)
    try:
        return graph_us(fn)
    finally:
        K.decode_plan, moe._GATE_UP, moe._DOWN, K.ROWS_MAX_T = orig


#: The rows sweep's candidates: gate/up (block_i, block_h, warps, stages) and down (block_n, block_k,
#: warps, stages), each list timed in order until its time budget ends. FOCUSED: deeper pipelines
#: (5, 6 stages) than ROWS_GRID's, at the best blocks of its runs (e30c2f8, 46c2f0c), against the
#: default's 3 and 4 in the same run.
ROWS_GRID = (list(itertools.product((8, 4, 16), (512, 1024, 256), (4, 8), (3, 4, 2))),
             list(itertools.product((8, 4, 16, 2), (1024, 512, 256), (4, 8), (3, 4, 2))))
FOCUSED_GRID = (list(itertools.product((16,), (256, 512), (4,), (3, 4, 5, 6))),
                list(itertools.product((8, 4, 16), (1024,), (4,), (3, 4, 5, 6)))
                + list(itertools.product((8, 4), (256,), (4,), (6, 8))))


def one_token_routes(seed):
    """For R one-token calls (scripts/stream_probe.py's R): each call's TOPK distinct experts, and
    equal weights."""
    from stream_probe import R
    gen = torch.Generator().manual_seed(seed)
    ids_all = torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(R)]).to(dev)
    return ids_all, torch.full((1, TOPK), 1.0 / TOPK, device=dev)


def rows_sweep(dtypes=("fp8", "bf16"), grid=ROWS_GRID, budget=70):
    """One token, R calls with different experts back to back in one CUDA graph (the way a
    decode step runs them; scripts/stream_probe.py): the row kernels' default plan against
    the three kernels, then the row kernels' blocks, warps and stages,
    gate/up first (down at its default), then down (gate/up at the best)."""
    from stream_probe import R, per_launch_us
    rec = {}
    ids_all, w = one_token_routes(1)
    for fp8 in (d == "fp8" for d in dtypes):
        tag = "fp8" if fp8 else "bf16"
        x, router, gu, dn, sc = inputs(1, fp8)
        calls = [lambda r=r: moe.fused_experts(x, ids_all[r:r + 1], w, gu, dn, gate_up_scale=sc[0],
                                               down_scale=sc[1]) for r in range(R)]
        ref = moe.reference_fused_experts(x, ids_all[:1], w, gu, dn, gate_up_scale=sc[0], down_scale=sc[1])
        got = calls[0]()
        err = float((got.float() - ref.float()).abs().max() / ref.float().abs().max())
        res = {"rows max rel err": err}
        saved = K.ROWS_MAX_T
        for name, lim in (("rows", 1), ("three", 0)):
            K.ROWS_MAX_T = lim
            res[name] = per_launch_us(calls, flush)
        K.ROWS_MAX_T = saved
        print(tag, res, flush=True)
        rec[f"{tag} one-token experts us"] = res
        base = K.rows_plan(TOPK, I, 1 if fp8 else 2)
        orig = (K.rows_plan, moe._GATE_UP_ROWS, moe._DOWN_ROWS)
        rows = []

        def timed(plan, a_opts, b_opts):
            K.rows_plan = lambda *a, **k: plan
            moe._GATE_UP_ROWS, moe._DOWN_ROWS = Staged(orig[1], **a_opts), Staged(orig[2], **b_opts)
            try:
                return per_launch_us(calls, flush)
            except Exception as e:  # out of resources
                return repr(e)[:80]
            finally:
                K.rows_plan, moe._GATE_UP_ROWS, moe._DOWN_ROWS = orig
        deadline = time.time() + budget
        best_a = (base.block_i, base.block_h, base.warps, base.stages, 1e9)
        for bi, bh, wp, st in grid[0]:
            if time.time() > deadline:
                break
            us = timed(dataclasses.replace(base, block_i=bi, block_h=bh), dict(num_warps=wp, STAGES=st), {})
            rows.append(("gate/up", bi, bh, wp, st, us))
            if isinstance(us, float) and us < best_a[-1]:
                best_a = (bi, bh, wp, st, us)
        deadline = time.time() + budget
        pa = dataclasses.replace(base, block_i=best_a[0], block_h=best_a[1])
        for bn, bk, wp, st in grid[1]:
            if time.time() > deadline:
                break
            k1, k2 = K.down_k_blocks(I, bk)  # (a step's I tiles from the cap, as rows_plan)
            us = timed(dataclasses.replace(pa, block_n=bn, block_k=k1, block_k2=k2,
                                           slot_sum=K.down_slot_sum(I, k1, k2)),
                       dict(num_warps=best_a[2], STAGES=best_a[3]), dict(num_warps=wp, STAGES=st))
            rows.append(("down", bn, bk, wp, st, us))
        rows.sort(key=lambda r: (r[0], r[-1] if isinstance(r[-1], float) else 1e9))
        rec[f"{tag} rows sweep"] = rows
        for r in [r for r in rows if r[0] == "gate/up"][:5] + [r for r in rows if r[0] == "down"][:5]:
            print(tag, r, flush=True)
    return rec


def _fit(pts):
    """Least squares of us = F + bytes / B over [(H, I, bytes, us)]."""
    n, mb, us = len(pts), [p[2] / 1e6 for p in pts], [p[3] for p in pts]
    mx, my = sum(mb) / n, sum(us) / n
    slope = sum((a - mx) * (b - my) for a, b in zip(mb, us)) / sum((a - mx) ** 2 for a in mb)
    return {"F us": round(my - slope * mx, 2), "B TB/s": round(1 / slope, 3) if slope > 0 else None,
            "points (H, I, bytes, us)": [(h, i, b, round(t, 2)) for h, i, b, t in pts]}


def fixed_cost(dtypes=("bf16", "fp8"), Hs=(1024, 2048, 3072, 4096), Is=(384, 768, 1152, 1536), parts=False):
    """The one-token experts' cost that does not scale with their bytes: R calls with different
    experts in one CUDA graph (as --rows) at hidden sizes ``Hs`` (width 768) and widths ``Is``
    (hidden 2048), 128 experts, top-8; each series fitted as us = F + bytes / B (least squares).
    F: launches, ramps, first-load latency, the h round trip, tails; B: the streaming rate. The
    width series changes the gate/up grid with the width, so only the hidden-size one isolates F.
    ``parts``: the hidden-size series again with each row kernel alone (the other one's launch
    replaced by nothing; the down kernel then reads whatever h holds, its timing unchanged), each
    fitted against its own bytes (gate/up two thirds of them, down one third)."""
    from stream_probe import R, per_launch_us
    rec = {}
    ids_all, w = one_token_routes(3)
    series = [("H", [(h, I) for h in Hs], None), ("I", [(H, i) for i in Is], None)]
    if parts:
        series = [series[0], ("H, gate/up alone", series[0][1], "_DOWN_ROWS"),
                  ("H, down alone", series[0][1], "_GATE_UP_ROWS")]
    for fp8 in (d == "fp8" for d in dtypes):
        tag = "fp8" if fp8 else "bf16"
        for name, shapes, stub in series:
            pts = []
            for h, i in shapes:
                x, _, gu, dn, sc = inputs(1, fp8, h + i, h, i)
                calls = [lambda r=r: moe.fused_experts(x, ids_all[r:r + 1], w, gu, dn, gate_up_scale=sc[0],
                                                       down_scale=sc[1]) for r in range(R)]
                nbytes = TOPK * {None: 3, "_DOWN_ROWS": 2, "_GATE_UP_ROWS": 1}[stub] * h * i * gu.element_size()
                with patch.object(moe, stub) if stub else contextlib.nullcontext():  # (a MagicMock: no launch)
                    pts.append((h, i, nbytes, per_launch_us(calls, flush)))
            rec[f"{tag} fixed cost by {name}"] = fit = _fit(pts)
            print(tag, name, fit, flush=True)
    return rec


def rows_by_tokens(Ts=(1, 2, 3, 4, 6, 8, 16)):
    """The row kernels against the three kernels by token count, bf16 and fp8, R calls with
    different routings in one CUDA graph (how ROWS_MAX_T was chosen)."""
    from stream_probe import R, per_launch_us
    rec = {}
    gen = torch.Generator().manual_seed(2)
    for fp8 in (True, False):
        tag = "fp8" if fp8 else "bf16"
        for T in Ts:
            x, router, gu, dn, sc = inputs(T, fp8)
            ids = torch.stack([torch.stack([torch.randperm(E, generator=gen)[:TOPK] for _ in range(T)])
                               for _ in range(R)]).to(dev)
            w = torch.full((T, TOPK), 1.0 / TOPK, device=dev)
            calls = [lambda r=r: moe.fused_experts(x, ids[r], w, gu, dn, gate_up_scale=sc[0], down_scale=sc[1])
                     for r in range(R)]
            saved, res = K.ROWS_MAX_T, {}
            for name, lim in (("rows", 64), ("three", 0)):
                K.ROWS_MAX_T = lim
                res[name] = round(per_launch_us(calls, flush), 2)
            K.ROWS_MAX_T = saved
            rec[f"{tag} T={T} experts us"] = res
            print(tag, T, res, flush=True)
    return rec


def router_times():
    """The one-token router kernel (matmul + top-k) by each top-k method (bitonic, arg-max) at
    the routers of Qwen3-30B-A3B (128 experts, top-8), Qwen3.5/3.6-MoE (256 + a shared gate,
    top-8) and LFM2-8B-A1B (32, top-4, sigmoid with a bias); device time from the profiler,
    ids of both methods compared."""
    rec = {}
    for E, shared, k in ((128, 0, 8), (256, 1, 8), (32, 0, 4)):
        x = torch.randn(1, H, device=dev).bfloat16()
        w = (torch.randn(E + shared, H, device=dev) * H ** -0.5).bfloat16()
        bias = torch.randn(E, device=dev) if E == 32 else None
        fn = lambda: moe.router(x, w, k, "sigmoid" if E == 32 else "softmax", norm_topk_prob=True,  # noqa: E731
                                expert_bias=bias, shared_gate=bool(shared))
        saved, res = K.TOPK_BITONIC, {}
        try:
            for name, on in (("bitonic", True), ("argmax", False)):
                K.TOPK_BITONIC = on
                ids = fn()[1].tolist()
                res[name] = (sum(us for kn, us in kernel_times(fn).items() if "_route" in kn), ids)
        finally:
            K.TOPK_BITONIC = saved
        rec[f"router E={E} top-{k} us"] = {"bitonic": res["bitonic"][0], "argmax": res["argmax"][0],
                                           "same ids": res["bitonic"][1] == res["argmax"][1]}
        print(f"router E={E} top-{k}", rec[f"router E={E} top-{k} us"], flush=True)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--router", action="store_true", help="time the router kernel by rank and by arg-max, then stop")
    ap.add_argument("--rows", action="store_true", help="one-token experts: row kernels against the others, "
                    "and a sweep of the row kernels' plan, then stop")
    ap.add_argument("--rows-t", action="store_true", help="row kernels against the three kernels by token "
                    "count, then stop")
    ap.add_argument("--rows-focused", action="store_true", help="--rows over FOCUSED_GRID (5 and 6 stages "
                    "beside 3 and 4) with no time limit")
    ap.add_argument("--fixed", action="store_true", help="one-token experts at several hidden sizes and "
                    "widths, each series fitted as us = F + bytes / B, then stop")
    ap.add_argument("--parts", action="store_true", help="with --fixed: the hidden-size series with each row "
                    "kernel alone too, instead of the width series")
    ap.add_argument("--tokens", type=int, default=1, help="tokens of the default profile and sweep (1)")
    ap.add_argument("--dtypes", default="bf16,fp8", help="experts of the default profile and sweeps")
    ap.add_argument("--budget", type=float, default=100, help="seconds of each kernel's sweep (100)")
    ap.add_argument("--json")
    a = ap.parse_args()
    T = a.tokens
    rec = {}
    if a.router or a.rows or a.rows_t or a.rows_focused or a.fixed:
        rec.update(fixed_cost(a.dtypes.split(","), parts=a.parts) if a.fixed else router_times() if a.router
                   else rows_sweep(a.dtypes.split(",")) if a.rows
                   else rows_sweep(a.dtypes.split(","), FOCUSED_GRID, 1e9) if a.rows_focused else rows_by_tokens())
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rec, f, indent=1)
        return
    for fp8 in [d == "fp8" for d in a.dtypes.split(",")]:
        tag = f"{'fp8' if fp8 else 'bf16'} T={T}"
        x, router, gu, dn, sc = inputs(T, fp8)
        w, ids = moe.route(F.linear(x, router), TOPK, norm_topk_prob=True)
        rec[f"{tag} kernels"] = kernel_times(lambda: layer(x, router, gu, dn, sc))
        rec[f"{tag} layer graph us"] = graph_us(lambda: layer(x, router, gu, dn, sc))
        rec[f"{tag} experts graph us"] = graph_us(
            lambda: moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=sc[0], down_scale=sc[1]))
        rec[f"{tag} router linear graph us"] = graph_us(lambda: F.linear(x, router))
        logits = F.linear(x, router)
        rec[f"{tag} route graph us"] = graph_us(lambda: moe.route(logits, TOPK, norm_topk_prob=True))
        rec[f"{tag} plan"] = dataclasses.asdict(K.decode_plan(T, TOPK, E, H, I, dev, 1 if fp8 else 2))
        print(json.dumps({k: v for k, v in rec.items() if k.startswith(tag)}, indent=1), flush=True)
        if not a.sweep:
            continue
        base = K.decode_plan(T, TOPK, E, H, I, dev, 1 if fp8 else 2)
        fn = lambda: moe.fused_experts(x, ids, w, gu, dn, gate_up_scale=sc[0], down_scale=sc[1])  # noqa: E731
        rows = []
        dots = (("default", moe._dot_dtype),) + ((("bf16", lambda x, mode: (torch.bfloat16, False)),) if fp8 else ())
        for dot_name, dot in dots:  # fp8 gate/up: also without the float16 route (S16) for x
            deadline = time.time() + a.budget
            for bi, bh, wp, st in itertools.product((32, 64, 16), (128, 256, 512), (4, 8), (3, 4, 2)):
                if time.time() > deadline:
                    break
                p = dataclasses.replace(base, block_i=bi, block_h=bh)
                saved, moe._dot_dtype = moe._dot_dtype, dot
                try:
                    rows.append(("gu", dot_name, bi, bh, wp, st,
                                 with_plan(fn, p, dict(num_warps=wp, num_stages=st), {})))
                except Exception as e:  # out of resources
                    rows.append(("gu", dot_name, bi, bh, wp, st, repr(e)[:80]))
                finally:
                    moe._dot_dtype = saved
        deadline = time.time() + a.budget
        for bn, bk, wp, st in itertools.product((64, 32, 128, 16), (64, 128, 256), (4, 8), (3, 4, 2)):
            if time.time() > deadline:
                break
            p = dataclasses.replace(base, block_n=bn, block_k=bk)
            try:
                rows.append(("dn", "default", bn, bk, wp, st, with_plan(fn, p, {}, dict(num_warps=wp, num_stages=st))))
            except Exception as e:
                rows.append(("dn", "default", bn, bk, wp, st, repr(e)[:80]))
        rows.sort(key=lambda r: (r[0], r[-1] if isinstance(r[-1], float) else 1e9))
        rec[f"{tag} sweep"] = rows
        for r in [r for r in rows if r[0] == "gu"][:8] + [r for r in rows if r[0] == "dn"][:8]:
            print(tag, r, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
