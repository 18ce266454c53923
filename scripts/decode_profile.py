"""Where a decode step's time goes: the engine's captured decode step of a named config (random
weights) replayed under the PyTorch profiler, kernel time per step grouped by family (matrix-
vector, attention, norm, rotary, MoE, sampling, recurrent, conv, PyTorch's own), next to the
step's wall time between events, so that the gaps between kernels show as well.

    PYTHONPATH=src python3 scripts/decode_profile.py --config qwen3-30b-a3b [--fp8] [--layers N]
        [--steps 32] [--json OUT] [--prefill]

On a machine without a GPU it runs the embedded default model eagerly on the CPU (CPU op
times; a check of the script, not a measurement).
"""
import argparse
import collections
import json
import time

import torch

#: kernel-name substring -> family (first match wins); anything else is PyTorch's own.
FAMILIES = [("_mv_kernel", "matvec"), ("_decode_kernel", "attention"), ("_rms_norm", "norm"),
            ("_qkv_rope", "rope"),
            ("_gate_up_kernel", "moe experts"), ("_gate_up_rows", "moe experts"), ("_down_rows", "moe experts"), ("_down_kernel", "moe experts"), ("_decode_combine", "attention"),
            ("_combine", "moe sum"),
            ("_router", "moe router"), ("_route", "moe router"), ("_sample", "sample"),
            ("_recurrent", "deltanet"), ("_chunk_", "deltanet"), ("_dw_kernel", "short conv"),
            ("_gmm_kernel", "grouped_mm"), ("_act_kernel", "moe experts"), ("_prefill_kernel", "attention"),
            ("_conv1d", "short conv")]


def family(name: str) -> str:
    return next((f for key, f in FAMILIES if key in name), "torch")


def summarize(times: dict) -> dict:
    """``harness.kernel_times`` of one step -> per family and per kernel: us and launches."""
    fam = collections.defaultdict(lambda: [0.0, 0.0])
    ker = collections.defaultdict(lambda: [0.0, 0.0])
    for name, (us, calls) in times.items():
        for d, k in ((fam, family(name)), (ker, name[:60])):
            d[k][0] += us
            d[k][1] += calls
    return {"families": dict(fam), "kernels": dict(ker)}


def print_summary(s: dict, total_us: float, per: str, top: int) -> None:
    """Kernel time by family (share of ``total_us``), then the ``top`` kernels."""
    for name, (us, calls) in sorted(s["families"].items(), key=lambda kv: -kv[1][0]):
        print(f"  {name:14s} {us:9.1f} us{per}  {calls:6.1f} launches{per}  {100 * us / total_us:5.1f}%")
    print("  top kernels:")
    for name, (us, calls) in sorted(s["kernels"].items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"    {us:9.1f} us {calls:6.1f}x  {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="qwen3-30b-a3b")
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--json", default=None)
    ap.add_argument("--prefill", action="store_true", help="profile the prompt's prefill instead (eager, as the "
                    "engine runs it): wall time and kernel time per prefill")
    args = ap.parse_args()
    from fastpath.bench.harness import kernel_times
    from fastpath.engine import bench
    from fastpath.engine.generate import Engine, SamplingParams
    from fastpath.models.config import named

    cuda = torch.cuda.is_available()
    if cuda:
        cfg = named(args.config)
        cfg = cfg.with_layers(args.layers) if args.layers else cfg
        model = bench.random_model(cfg, device="cuda", fp8=args.fp8)
    else:  # a check of the script on the embedded default
        from fastpath.engine.commands import DEFAULT_MODEL
        from fastpath.models.loader import load
        model = load(DEFAULT_MODEL, device="cpu", dtype=torch.float32)
        args.prompt_len, args.steps = min(args.prompt_len, 16), min(args.steps, 4)
        args.config, args.fp8 = "embedded default (CPU check)", False
    eng = Engine(model, max_seq=args.prompt_len + 3 * args.steps + 16, batch=1)
    sp = SamplingParams(0.0)
    prompt = torch.randint(0, model.cfg.vocab_size, (args.prompt_len,), generator=torch.Generator().manual_seed(0))
    for _ in eng.generate_step([prompt.tolist()], 4, sp):  # prefill, compile, capture
        pass
    if args.prefill:
        return profile_prefill(model, prompt, args, cuda)
    if eng.graphs:
        replay = eng._graph_for(1, sp).replay
    else:
        def replay():
            eng._step(1, sp)
    replay()  # positions run on from the prompt: each replay is the next token
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.steps):
            replay()
        end.record()
        end.synchronize()
        step_us = 1e3 * start.elapsed_time(end) / args.steps
    else:
        t = time.perf_counter()
        for _ in range(args.steps):
            replay()
        step_us = 1e6 * (time.perf_counter() - t) / args.steps
    s = summarize(kernel_times(replay, args.steps, cuda=cuda))
    busy = sum(us for us, _ in s["families"].values()) if cuda else float("nan")
    print(f"{args.config}{' fp8' if args.fp8 else ''} ({model.cfg.num_layers} layers): step {step_us:.1f} us "
          f"({1e6 / step_us:.1f} tok/s); kernels {busy:.1f} us, gaps {step_us - busy:.1f} us")
    print_summary(s, step_us, "/step", 12)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"config": args.config, "fp8": args.fp8, "layers": model.cfg.num_layers,
                                "step_us": step_us, "kernel_us": busy, **s}) + "\n")


def profile_prefill(model, prompt, args, cuda: bool) -> None:
    """Wall time of ``model.prefill`` of the prompt (rows 0, from position 0: it rewrites the
    same cache rows, so it can be repeated), its kernel time by family and its top kernels."""
    from fastpath.bench.harness import kernel_times
    tokens = prompt[None].to(model.device)

    def run():
        model.prefill(tokens, 0)
    run()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    reps = 5
    t = time.perf_counter()
    for _ in range(reps):
        run()
    sync()
    wall_us = 1e6 * (time.perf_counter() - t) / reps
    s = summarize(kernel_times(run, reps, cuda=cuda))
    busy = sum(us for us, _ in s["families"].values())
    print(f"{args.config}{' fp8' if args.fp8 else ''} prefill of {tokens.shape[1]} tokens: {wall_us:.0f} us wall "
          f"({tokens.shape[1] / wall_us * 1e6:.0f} tok/s); kernels {busy:.0f} us")
    print_summary(s, wall_us, "", 16)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"config": args.config, "fp8": args.fp8, "layers": model.cfg.num_layers,
                                "prefill_tokens": tokens.shape[1], "wall_us": wall_us, "kernel_us": busy, **s}) + "\n")


if __name__ == "__main__":
    main()
