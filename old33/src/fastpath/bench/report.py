"""Write docs/perf.md from the benchmark records: ``python -m fastpath.bench.report``.

``[--results DIR]`` (default ``bench/results``) holds the JSONL files that
``python -m fastpath.bench`` appends to; ``[--out PATH]`` (default ``docs/perf.md``). For each
GPU and suite, the newest record of each row (case, shape, dtype, mode, L2) with its run's
date and commit, and the newest run's ceilings, versions and command. The output depends only on the records (no clock, no paths): deterministic.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HEADER = ("> **Generated file: do not edit by hand.** Written by `python -m fastpath.bench.report` "
          "from the JSONL records of `python -m fastpath.bench` (bench/results/); rerun those instead.")
COLUMNS = [("case", "case"), ("shape", "shape"), ("dtype", "dtype"), ("mode", "mode"), ("l2", "L2"),
           ("ours_us", "ours (us)"), ("torch_us", "torch (us)"), ("ratio", "torch / ours"),
           ("bytes", "bytes moved"), ("gbps", "GB/s"), ("pct_copy", "% of copy"),
           ("target", "target"), ("met", "met"), ("ok", "check")]


def load(results: Path) -> list:
    """Every record of every ``*.jsonl`` under ``results``, in file-name then line order."""
    records = []
    for path in sorted(Path(results).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"skipping a line of {path.name} that is not JSON", file=sys.stderr)
    return records


def _bytes(n) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _cell(key, row) -> str:
    v = row.get(key)
    if key == "ok":
        return "ok" if v else f"FAIL: {row.get('check', '')}".replace("|", "\\|")
    if v is None:
        return "-"
    if key == "shape":
        return "x".join(map(str, v))
    if key == "met":
        return "yes" if v else "**no**"
    if key == "ratio":
        return f"{v:.2f}x"
    if key == "bytes":
        return _bytes(v)
    if key == "gbps":
        return f"{v:.0f}"
    if key == "pct_copy":
        return f"{v:.1f}"
    if key.endswith("_us"):
        return f"{v:.2f}" if v < 1000 else f"{v:.0f}"
    return str(v)


def render(records: list) -> str:
    by_gpu = {}
    for r in records:
        by_gpu.setdefault(r.get("gpu", "unknown GPU"), []).append(r)
    out = ["# Performance", "", HEADER, "",
           "Timings from `python -m fastpath.bench` (fastpath.bench.harness: median of device-event "
           "timings after warm-up. L2 *cold*: a buffer of 2x the L2 size was read (clean lines, nothing to write back) before each "
           "call; *hot*: the inputs were just written, as logits are right after the lm_head matmul. "
           "*eager* rows are single calls, so they include the host's launch overhead wherever it "
           "exceeds the GPU time; *graph* rows are CUDA-graph replays of many calls (cold: rotating "
           "over inputs larger than 2x L2) divided by the calls. *torch / ours* > 1 means fastpath "
           "is faster; *bytes moved* "
           "is the fewest bytes the op must read and write; *% of copy* is the achieved GB/s over the "
           "device-to-device copy bandwidth measured in the same run.", ""]
    for gpu in sorted(by_gpu):
        recs = by_gpu[gpu]
        out += [f"## {gpu}"]
        out += _decode_table([r for r in recs if r.get("suite") == "decode"])
        out += _vae_table([r for r in recs if r.get("suite") == "vae"])
        for suite in dict.fromkeys(r.get("suite", "?") for r in recs if r.get("suite") not in ("decode", "vae")):
            mine = [r for r in recs if r.get("suite", "?") == suite]
            rows = _newest_rows(mine)
            runs = sorted({(r.get("date", "?"), r.get("commit", "unknown")) for r in rows})
            first = max(rows, key=_when)
            ceil = first.get("ceilings", {})
            out += ["", f"### {suite}", "",
                    "- run: " + "; ".join(f"{d} (UTC), commit `{c}`" for d, c in runs)
                    + (" (each row: the newest record of its case; the commit column says which run)"
                       if len(runs) > 1 else ""),
                    f"- versions: torch {first.get('torch', '?')}, triton {first.get('triton', '?')}, "
                    f"python {first.get('python', '?')}; {first.get('sms', '?')} SMs",
                    f"- command: `{first.get('command', '?')}`"]
            if ceil:
                out.append(f"- ceilings (same run): device-to-device copy {ceil['copy_gbps']:.0f} GB/s "
                           f"(read + write), bf16 matmul {ceil['matmul_bf16_tflops']:.0f} TFLOP/s "
                           f"({ceil.get('matmul_n', 8192)}^3, random data), "
                           f"L2 {ceil.get('l2_bytes', 0) / 2**20:.0f} MiB")
            cols = COLUMNS + ([("commit", "commit")] if len(runs) > 1 else [])
            out += ["", "| " + " | ".join(t for _, t in cols) + " |", "|" + "---|" * len(cols)]
            out += ["| " + " | ".join(_cell(k, r) for k, _ in cols) + " |" for r in rows]
        out.append("")
    return "\n".join(out) + "\n"


def _when(r: dict) -> str:
    return r.get("run", r.get("date", ""))


def _newest(recs: list, key) -> dict:
    """key(record) -> the newest record with that key (the later one of a tie)."""
    newest: dict = {}
    for r in recs:
        if key(r) not in newest or _when(r) >= _when(newest[key(r)]):
            newest[key(r)] = r
    return newest


def _newest_rows(mine: list) -> list:
    """The newest record of each (case, shape, dtype, mode, L2) row, in the order the newest
    run lists them (rows it dropped follow, newer runs first)."""
    key = lambda r: (r.get("case"), str(r.get("shape")), r.get("dtype"), r.get("mode"), r.get("l2"))  # noqa: E731
    newest = _newest(mine, key)
    order = {}
    for r in sorted(mine, key=_when, reverse=True):
        order.setdefault(key(r), len(order))
    return sorted(newest.values(), key=lambda r: order[key(r)])


DECODE_COLUMNS = ["model", "weights", "engine", "batch", "prefill tok/s", "decode tok/s", "GB read / token",
                  "% of roofline", "fastpath / this (same run)", "date, commit", "command"]


def _decode_table(recs: list) -> list:
    """``fastpath bench-decode`` records: the newest per (model, layers, weights, engine, batch)."""
    if not recs:
        return []
    newest = _newest(recs, lambda r: (r.get("model"), r.get("layers"), bool(r.get("fp8")),
                                      r.get("engine", "fastpath"), r.get("batch", 1)))
    out = ["", "### decode (`fastpath bench-decode`)", "",
           "Batch 1 unless stated, random weights with the real shapes, 512-token prompt, 256 new tokens "
           "(transformers: 32), greedy. *GB read / token*: the active weights (top-k experts only, the "
           "whole LM head) and the KV cache at the mean context; *% of roofline*: decode tok/s over "
           "copy bandwidth (measured in the same run) / bytes per token. The last-but-one column is "
           "fastpath's decode tok/s over this row's, both measured in one run.", "",
           "| " + " | ".join(DECODE_COLUMNS) + " |", "|" + "---|" * len(DECODE_COLUMNS)]
    for key in sorted(newest, key=lambda k: (str(k[0]), str(k[1]), k[2], k[3] != "fastpath", k[3], k[4])):
        r = newest[key]
        model = f"{r.get('model')} ({r.get('layers')} layers)"
        cells = [model, "fp8" if r.get("fp8") else r.get("dtype", "bfloat16"), r.get("engine", "fastpath"),
                 str(r.get("batch", 1)), f"{r['prefill_tps']:.0f}", f"{r['decode_tps']:.1f}",
                 f"{r['bytes_per_token'] / 1e9:.2f}" if r.get("bytes_per_token") else "-",
                 f"{r['pct_roofline']:.0f}%" if r.get("pct_roofline") else "-",
                 f"{r['ratio']:.1f}x" if r.get("ratio") else "-",
                 f"{r.get('date', '?')[:16]}, `{r.get('commit', '?')}`", f"`{r.get('command', '?')}`"]
        out.append("| " + " | ".join(cells) + " |")
    first = recs[-1]
    out.append(f"\nVersions: torch {first.get('torch', '?')}, triton {first.get('triton', '?')}, "
               f"python {first.get('python', '?')}.")
    return out


VAE_COLUMNS = ["VAE", "latent (C x T x H x W)", "dtype", "optimize_vae options", "stock s", "fastpath s",
               "time: stock / fastpath", "stock peak GiB", "fastpath peak GiB", "memory: fastpath / stock",
               "vs stock: rel err, PSNR", "vs float32: stock, fastpath", "date, commit"]


def _vae_table(recs: list) -> list:
    """``python -m fastpath.bench.conv vae`` records: the newest per (VAE, latent, dtype, options)."""
    if not recs:
        return []
    newest = _newest(recs, lambda r: (r.get("case"), tuple(r.get("shape", ())), r.get("dtype"), r.get("conv"),
                                      bool(r.get("cudnn_benchmark")), bool(r.get("channels_last"))))
    out = ["", "### VAE decode (`python -m fastpath.bench.conv vae`)", "",
           "Random weights with the real configs, one decode each way in the same process after a "
           "2-frame warm-up: diffusers' stock decoder, then the same instance after `optimize_vae`. "
           "*peak*: the allocator's peak during the decode above what was allocated before it (the "
           "weights and the latent). 16-bit rows also give both decoders' relative error against a float32 "
           "decode of the same weights (the check: fastpath's at most 1.25x stock's). 21 latent frames = 81 video frames; 60x104 latents = 480x832 "
           "video (Wan2.2: 30x52 with its 16x compression), 88x160 / 44x80 = 704x1280. *channels_last*: the "
           "decoder ran in channels-last-3d, `optimize_vae`'s default on CUDA since `35686f5`; rows without "
           "it ran NCDHW (the default before). *cudnn_benchmark*: cuDNN's algorithm search was on during the "
           "decode, `optimize_vae`'s default for float32 since `e113b2f`.", "",
           "| " + " | ".join(VAE_COLUMNS) + " |", "|" + "---|" * len(VAE_COLUMNS)]
    for key in sorted(newest, key=lambda k: tuple(map(str, k))):
        r = newest[key]
        opts = f"conv={r.get('conv')}" + (", cudnn_benchmark" if r.get("cudnn_benchmark") else "") + \
            (", channels_last" if r.get("channels_last") else "")
        cells = [r["case"].replace("vae decode ", ""), "x".join(map(str, r.get("shape", ()))), r.get("dtype", "?"),
                 opts, f"{r['stock_s']:.3f}", f"{r['ours_s']:.3f}", f"{r['speedup']:.2f}x",
                 f"{r['stock_peak_gib']:.2f}", f"{r['ours_peak_gib']:.2f}", f"{r['memory_ratio']:.2f}x",
                 f"{r['rel_err']:.1e}, {r['psnr_db']:.1f} dB",
                 f"{r['stock_err_f32']:.1e}, {r['ours_err_f32']:.1e}" if "ours_err_f32" in r else "-",
                 f"{r.get('date', '?')[:16]}, `{r.get('commit', '?')}`"]
        out.append("| " + " | ".join(cells) + " |")
    first = recs[-1]
    out.append(f"\nVersions: torch {first.get('torch', '?')}, triton {first.get('triton', '?')}, "
               f"python {first.get('python', '?')}, diffusers 0.42.1.")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fastpath.bench.report",
                                description=__doc__.splitlines()[0])
    p.add_argument("--results", default="bench/results",
                   help="folder of JSONL records (default: bench/results)")
    p.add_argument("--out", default="docs/perf.md", help="markdown file to write (default: docs/perf.md)")
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    records = load(Path(args.results))
    if not records:
        print(f"no benchmark records (*.jsonl) under {args.results}: nothing written", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(records))
    print(f"wrote {out} from {len(records)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
