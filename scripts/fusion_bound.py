"""What a fusion could save at most, before writing it: the engine's captured decode step of a
named config (random weights) timed with one piece of the step left out or changed. The
outputs of a "left out" variant are wrong; only its time means something (an upper bound of
what folding that piece into a neighbouring kernel can save).

    PYTHONPATH=src python3 scripts/fusion_bound.py --config qwen3.6-35b-a3b \
        [--variants base,no_norm,...] [--reps 2] [--steps 64] [--json OUT]

Variants (interleaved ``--reps`` times, each a fresh engine and graph on the same weights):
``base``; ``no_norm`` (Qwen3.5's gated RMSNorm skipped, the output projection alone); ``no_resnorm`` (every residual-add RMSNorm of the layers
skipped); ``no_gate`` (the gated attention's sigmoid gate skipped);
``step_bv<N>`` (the recurrent step's Dv block forced to N); ``split<N>`` (decode attention's
KV splits forced to N).
"""
import argparse
import contextlib
import json
import statistics

import torch


@contextlib.contextmanager
def patched(model, name: str):
    import fastpath.models.transformer as tr
    import fastpath.ops.attention as at
    import fastpath.ops.linear as linear
    import fastpath.ops.gated_delta as gd
    undo = []

    def setattr_(obj, attr, value):
        undo.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, value)
    if name == "no_norm":  # the gated norm (inside the output projection in decode) skipped
        setattr_(tr, "group_rms_norm_linear", lambda x, n, eps, g, w, b=None, weight_scale=None: linear.linear(
            x, w, b, weight_scale=weight_scale))
    if name == "no_resnorm":  # every residual-add norm in a kernel of its own skipped: (x, h) = (y, h)
        # (norms inside projections stay; linear.FUSE_NORM False moves them here)
        def skip(real):
            return lambda x, w, eps, residual=None, **kw: (x, residual) if residual is not None else real(
                x, w, eps, **kw)
        setattr_(linear, "rms_norm", skip(linear.rms_norm))
        setattr_(tr, "fused_rms_norm", skip(tr.fused_rms_norm))
    if name == "no_gate":
        for layer in model.layers:
            if getattr(layer.mixer, "gate", False):
                setattr_(layer.mixer, "gate", False)
    if name.startswith("step_bv"):
        bv = int(name[7:])
        setattr_(gd, "_step_bv", lambda n_bh, Dv, device: bv)
    if name.startswith("split"):
        setattr_(at, "SPLIT_OVERRIDE", int(name[5:]))
    try:
        yield
    finally:
        for obj, attr, old in reversed(undo):
            setattr(obj, attr, old)


def step_us(model, prompt, steps: int) -> float:
    from fastpath.engine.generate import Engine, SamplingParams
    eng = Engine(model, max_seq=len(prompt) + steps + 64, batch=1)
    sp = SamplingParams(0.0)
    for _ in eng.generate_step([prompt], 4, sp):  # prefill, compile, capture
        pass
    replay = eng._graph_for(1, sp).replay
    replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        replay()
    end.record()
    end.synchronize()
    return 1e3 * start.elapsed_time(end) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="qwen3.6-35b-a3b")
    ap.add_argument("--variants", default="base,no_norm,no_resnorm,no_gate")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("fusion_bound.py times CUDA-graph replays: it needs a GPU")
    from fastpath.engine import bench
    from fastpath.models.config import named
    model = bench.random_model(named(args.config), device="cuda", fp8=args.fp8)
    prompt = torch.randint(0, model.cfg.vocab_size, (args.prompt_len,), generator=torch.Generator().manual_seed(0))
    names = args.variants.split(",")
    times = {n: [] for n in names}
    for _ in range(args.reps):
        for n in names:
            with patched(model, n):
                times[n].append(step_us(model, prompt.tolist(), args.steps))
    base = statistics.median(times["base"]) if "base" in times else None
    for n in names:
        t = statistics.median(times[n])
        rel = f"  {t - base:+7.1f} us vs base" if base else ""
        print(f"{args.config}{' fp8' if args.fp8 else ''} {n:14s} {t:8.1f} us/step ({1e6 / t:6.1f} tok/s){rel}  "
              f"runs {', '.join(f'{x:.1f}' for x in times[n])}")
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"config": args.config, "fp8": args.fp8, "variant": n, "step_us": t,
                                    "runs": times[n]}) + "\n")


if __name__ == "__main__":
    main()
