#!/usr/bin/env python
"""Batch-1 greedy decode tokens/s of a Qwen3-30B-A3B-shaped transformers Qwen3-MoE model
(random bf16 weights, built from a config: no download) with each experts implementation:
transformers' "eager", "grouped_mm", "batched_mm", and fastpath's "fastpath".

    python scripts/moe_decode_tps.py --json moe_tps.json                 # 4 layers
    python scripts/moe_decode_tps.py --layers 2 4 8 --json moe_tps.json  # + a linear fit to 48 layers

Cache modes (``--modes``):

* ``dynamic``: transformers' default ``generate()``: DynamicCache, each step eager PyTorch.
* ``static``: ``cache_implementation="static"``: a StaticCache, with which transformers'
  ``generate()`` compiles the decode step itself (``torch.compile(mode="reduce-overhead")``:
  CUDA graphs) on a CUDA device. Whether it did is recorded per row (``compiled``).

Decode rate: two greedy generations from the same 16-token prompt, ``--warm`` (8) and
``--warm + --new-tokens`` new tokens; ``new_tokens / (t_long - t_short)`` (the prefill and the
first steps cancel), median of ``--reps`` pairs after warm-up runs. Rows also give the weight
bytes each token reads (batch 1: attention, router, the 8 routed experts of each layer, lm_head),
and the fraction of the bandwidth roofline (device copy bandwidth measured in the same run).

Only a few layers fit the time of one run (the full 48-layer model is ~61 GB, and compiling
it takes minutes), so the rows are per layer count, and a 48-layer figure is EXTRAPOLATED: a
least-squares line ms/token = a + b * layers over the measured layer counts when there are
two or more, else the one measurement scaled by bytes per token (assumes every byte costs the
same time; labelled as such). Results (and the environment) are written to ``--json`` after
every measurement, so a run cut short keeps what it measured; ``--budget-s`` skips what would
not fit.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

try:  # run from a checkout without installing: PYTHONPATH=src, or this fallback
    import fastpath  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

IMPLS = ("eager", "grouped_mm", "batched_mm", "fastpath")
MODES = ("dynamic", "static")

#: Qwen/Qwen3-30B-A3B config.json (num_hidden_layers set per run).
QWEN3_30B_A3B = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                     num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
                     num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
                     max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False,
                     initializer_range=0.02)
#: --tiny: the same structure at toy size, to check the script on a CPU.
TINY = dict(QWEN3_30B_A3B, vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=48,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=16, num_experts_per_tok=4,
            max_position_embeddings=512)


def build_config(layers: int, tiny: bool):
    from transformers import Qwen3MoeConfig
    kw = dict(TINY if tiny else QWEN3_30B_A3B, num_hidden_layers=layers)
    rope_theta = kw.pop("rope_theta")
    try:  # transformers 5 takes rope_parameters; older 5.x releases still accept rope_theta
        return Qwen3MoeConfig(**kw, rope_parameters={"rope_type": "default", "rope_theta": rope_theta})
    except TypeError:
        return Qwen3MoeConfig(**kw, rope_theta=rope_theta)


def build_model(layers: int, device: str, tiny: bool):
    import torch
    from transformers import Qwen3MoeForCausalLM
    cfg = build_config(layers, tiny)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3MoeForCausalLM._from_config(cfg, dtype=torch.bfloat16)
    model.eval()
    model.generation_config.eos_token_id = None  # never stop early: every run makes its tokens
    model.generation_config.pad_token_id = 0
    return model


def bytes_per_token(cfg, context: int) -> dict:
    """Bytes one batch-1 decode step must read (bf16): per layer and the rest."""
    h, i, e, k = cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts, cfg.num_experts_per_tok
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    attn = h * q + 2 * h * kv + q * h + 2 * cfg.head_dim + 2 * h  # q, k, v, o, q/k norms, layer norms
    per_layer = 2 * (attn + e * h + k * 3 * i * h) + 2 * 2 * kv * context  # + router, 8 experts, KV cache
    rest = 2 * (cfg.vocab_size * h + h + h)  # lm_head, final norm, one embedding row
    return {"per_layer": per_layer, "rest": rest, "total": rest + cfg.num_hidden_layers * per_layer}


def copy_bandwidth_gbps(device: str) -> float | None:
    """Device-to-device copy bandwidth (bytes read + written per second), as the bench harness measures it."""
    if not device.startswith("cuda"):
        return None
    from fastpath.bench.harness import measure_ceilings
    return measure_ceilings()["copy_gbps"]


def _sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def generate_s(model, prompt, new_tokens: int, mode: str, device: str):
    _sync(device)
    t0 = time.perf_counter()
    kw = {"cache_implementation": "static"} if mode == "static" else {}
    out = model.generate(prompt, attention_mask=prompt.new_ones(prompt.shape), do_sample=False,
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
    _sync(device)
    return time.perf_counter() - t0, out[0, prompt.shape[1]:]


def measure(model, prompt, impl: str, mode: str, args) -> dict:
    import warnings

    import torch
    from torch._dynamo.utils import counters

    model.set_experts_implementation(impl)
    if mode == "static":
        torch._dynamo.reset()  # a fresh compile per implementation (no recompile limit, no stale graphs)
    counters.clear()
    n_short, n_long = args.warm, args.warm + args.new_tokens
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        _, tokens = generate_s(model, prompt, n_long, mode, args.device)  # long first: the static cache keeps its size
        generate_s(model, prompt, n_short, mode, args.device)
        warmup_s = time.perf_counter() - t0
        diffs = []
        for _ in range(args.reps):
            short, _ = generate_s(model, prompt, n_short, mode, args.device)
            long, tokens = generate_s(model, prompt, n_long, mode, args.device)
            diffs.append(long - short)
    ms = 1e3 * statistics.median(diffs) / args.new_tokens
    return {"ms_per_token": ms, "tok_s": 1e3 / ms, "warmup_s": warmup_s,
            "compiled": counters["stats"]["unique_graphs"] > 0,
            "graph_breaks": sum(counters["graph_break"].values()),
            "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
            "warnings": sorted({str(w.message)[:300] for w in caught if "experts" in str(w.message)}),
            "tokens": tokens.tolist(), "experts_implementation": model.config._experts_implementation}


def extrapolate(rows: list, target: int, cfg_bytes) -> list:
    """One 48-layer (``target``) estimate per (mode, impl), clearly labelled with its method."""
    out = []
    keys = sorted({(r["mode"], r["impl"]) for r in rows if r.get("ms_per_token")})
    for mode, impl in keys:
        pts = sorted((r["layers"], r["ms_per_token"]) for r in rows
                     if r["mode"] == mode and r["impl"] == impl and r.get("ms_per_token"))
        if len({p[0] for p in pts}) >= 2:
            n = len(pts)
            mx = sum(p[0] for p in pts) / n
            my = sum(p[1] for p in pts) / n
            b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
            a = my - b * mx
            ms = a + b * target
            how = (f"EXTRAPOLATED: linear fit ms/token = {a:.3f} + {b:.4f} * layers over layers "
                   f"{[p[0] for p in pts]}")
        else:
            layers, ms_l = pts[-1]
            ratio = cfg_bytes(target)["total"] / cfg_bytes(layers)["total"]
            ms = ms_l * ratio
            how = (f"EXTRAPOLATED from {layers} layers by bytes per token (x{ratio:.2f}); assumes time "
                   "proportional to bytes read; pass two or more --layers for a linear fit")
        out.append({"mode": mode, "impl": impl, "layers": target, "ms_per_token": ms,
                    "tok_s": 1e3 / ms if ms > 0 else None, "method": how})
    return out


def environment(args) -> dict:
    import torch
    import transformers
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "device": args.device,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv[1:]}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception as exc:  # recorded, not fatal: fastpath then runs its reference path
        env["triton"] = f"unavailable ({type(exc).__name__})"
    if args.device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def print_table(rows: list, estimates: list) -> None:
    head = f"{'layers':>6} {'mode':<8} {'impl':<11} {'tok/s':>9} {'ms/tok':>8} {'GB/tok':>7} {'%roof':>6} " \
           f"{'compiled':>8} {'agree':>6}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        if r.get("ms_per_token") is None:
            print(f"{r['layers']:>6} {r['mode']:<8} {r['impl']:<11} {'-':>9} {'-':>8} {'-':>7} {'-':>6} {'-':>8} "
                  f"{'-':>6}  {r.get('error') or r.get('skipped')}")
            continue
        roof = f"{r['pct_roofline']:.1f}" if r.get("pct_roofline") is not None else "-"
        agree = f"{r['agree']:.2f}" if r.get("agree") is not None else "-"
        note = [f"{r[k]} {k.replace('_', ' ')}" for k in ("graph_breaks", "cudagraph_skips") if r.get(k)]
        note += [f"fastpath falls back: {r['fastpath_fallback']}"] if r.get("fastpath_fallback") else []
        print(f"{r['layers']:>6} {r['mode']:<8} {r['impl']:<11} {r['tok_s']:>9.1f} {r['ms_per_token']:>8.3f} "
              f"{r['bytes_per_token'] / 1e9:>7.3f} {roof:>6} {str(r['compiled']):>8} {agree:>6}  {'; '.join(note)}")
    for e in estimates:
        tok = f"{e['tok_s']:.1f}" if e["tok_s"] else "-"
        print(f"{e['layers']:>6} {e['mode']:<8} {e['impl']:<11} {tok:>9} {e['ms_per_token']:>8.3f}  {e['method']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, nargs="+", default=[4], help="layer counts to build and time (default 4)")
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--new-tokens", type=int, default=64, help="decode steps timed per run (default 64)")
    p.add_argument("--warm", type=int, default=8, help="new tokens of the short run (default 8)")
    p.add_argument("--prompt", type=int, default=16, help="prompt length (default 16)")
    p.add_argument("--reps", type=int, default=3, help="timed (short, long) pairs, median (default 3)")
    p.add_argument("--target-layers", type=int, default=48, help="extrapolate to this many layers (default 48)")
    p.add_argument("--budget-s", type=float, default=540.0,
                   help="skip what is left after this many seconds (default 540: one 10-minute command)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="toy sizes, to check the script (e.g. on a CPU)")
    p.add_argument("--json", metavar="PATH", help="write the results here (after every measurement)")
    args = p.parse_args(argv)

    import torch

    import fastpath.integrations.transformers as fpt
    fpt.register()
    start = time.perf_counter()
    env = environment(args)
    copy_gbps = copy_bandwidth_gbps(args.device)
    env["copy_gbps"] = copy_gbps
    print(f"{env.get('gpu', args.device)}, torch {env['torch']}, transformers {env['transformers']}, "
          f"triton {env['triton']}" + (f", copy {copy_gbps:.0f} GB/s" if copy_gbps else ""), flush=True)
    print("modes: dynamic = DynamicCache, eager PyTorch steps; static = StaticCache, with which generate() "
          "compiles the decode step itself (torch.compile mode='reduce-overhead': CUDA graphs) on a GPU "
          "('compiled' column: whether it did)", flush=True)
    rows: list = []
    result = {"env": env, "config": "tiny" if args.tiny else "Qwen/Qwen3-30B-A3B", "rows": rows, "estimates": []}

    def cfg_bytes(layers):
        return bytes_per_token(build_config(layers, args.tiny), args.prompt + args.warm + args.new_tokens // 2)

    def save():
        result["estimates"] = extrapolate(rows, args.target_layers, cfg_bytes)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)

    g = torch.Generator().manual_seed(0)
    for layers in args.layers:
        if time.perf_counter() - start > args.budget_s:
            rows += [{"layers": layers, "mode": m, "impl": i, "skipped": "time budget"}
                     for m in args.modes for i in args.impls]
            continue
        model = build_model(layers, args.device, args.tiny)
        prompt = torch.randint(1, model.config.vocab_size, (1, args.prompt), generator=g).to(args.device)
        nbytes = cfg_bytes(layers)["total"]
        reference = None
        for mode in args.modes:
            # compiled, transformers' eager experts (a data-dependent loop) break the graph: last
            for impl in sorted(args.impls, key=lambda i: mode == "static" and i == "eager"):
                row = {"layers": layers, "mode": mode, "impl": impl, "bytes_per_token": nbytes}
                if impl == "fastpath":  # None: fused_experts serves every experts module
                    row["fastpath_fallback"] = fpt.fallback_reason(model.model.layers[0].mlp.experts)
                if time.perf_counter() - start > args.budget_s:
                    row["skipped"] = "time budget"
                else:
                    try:
                        row.update(measure(model, prompt, impl, mode, args))
                    except Exception as exc:  # recorded with the row, the rest still runs
                        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                        _sync(args.device)
                if row.get("tok_s"):
                    roof = copy_gbps * 1e9 / nbytes if copy_gbps else None
                    row["roofline_tok_s"] = roof
                    row["pct_roofline"] = 100 * row["tok_s"] / roof if roof else None
                    reference = reference or row["tokens"]
                    row["agree"] = sum(a == b for a, b in zip(row["tokens"], reference)) / len(reference)
                rows.append(row)
                save()
                print(f"layers {layers} {mode:<8} {impl:<11} " + (
                    f"{row['tok_s']:.1f} tok/s, compiled={row['compiled']}" if row.get("tok_s")
                    else row.get("error") or row.get("skipped")), flush=True)
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    save()
    print()
    print_table(rows, result["estimates"])
    print("\n'agree': fraction of the generated tokens equal to the first implementation's (random "
          "weights make near-ties, so bf16 rounding differences may change a greedy token).")
    if args.json:
        print(f"wrote {args.json}")
    failed = [r for r in rows if r.get("error")]
    return 1 if failed and len(failed) == len(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
