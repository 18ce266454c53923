"""A/B of module knobs inside the decode engine: one process, one random-weight model a
config, the variants alternated round by round (each a fresh engine and CUDA graph on the same
weights), decode tok/s of each. In-process A/B repeats within ~0.3% on the H200, where
separate processes differ by ~1%.

    PYTHONPATH=src python3 scripts/knob_ab.py --configs lfm2.5-8b-a1b,qwen3-30b-a3b:fp8 \
        --variant "fused:linear.FUSE_NORM=True" --variant "own kernel:linear.FUSE_NORM=False" \
        [--rounds 2] [--json OUT] [--batch B] [--layers L] [--prompt-len N] [--new-tokens N]

A variant is ``NAME:ASSIGNMENTS``, assignments ``module.ATTR=value`` separated by ``;``
(modules under ``fastpath.ops``, or a full dotted path; values Python literals). Every knob
any variant names is put back to its default before each run.
"""
import argparse
import ast
import importlib
import json

import torch

from fastpath._core import memo
from fastpath.engine import bench
from fastpath.models.config import named


def parse(spec: str) -> tuple:
    """``"name:mod.A=1;mod.B=False"`` -> ``(name, [(module, "A", 1), (module, "B", False)])``."""
    name, _, assigns = spec.partition(":")
    out = []
    for a in filter(None, (s.strip() for s in assigns.split(";"))):
        target, _, value = a.partition("=")
        path, _, attr = target.strip().rpartition(".")
        mod = importlib.import_module(path if path.startswith("fastpath") else f"fastpath.ops.{path}")
        if not hasattr(mod, attr):
            raise SystemExit(f"--variant {spec!r}: {mod.__name__} has no {attr}")
        out.append((mod, attr, ast.literal_eval(value.strip())))
    return name, out


def knob_defaults(variants: list) -> dict:
    """The current value of every knob any of ``variants`` (``parse`` results) sets."""
    return {(m, a): getattr(m, a) for _, sets in variants for m, a, _ in sets}


def apply(defaults: dict, sets=()) -> None:
    """Every knob back to ``defaults``, then ``sets`` (one variant's assignments) on top."""
    for (m, a), v in defaults.items():
        setattr(m, a, v)
    for m, a, v in sets:
        setattr(m, a, v)


def run(configs: list, variants: list, rounds: int = 2, json_path=None, layers: int = 0, **bench_kw) -> list:
    """Decode tok/s of every (config, round, variant); ``variants``: ``parse`` results; ``layers``: cut
    the configs to that many layers (0: all); ``bench_kw``: batch, prompt_len, new_tokens of the runs."""
    memo.ENABLED = False  # a replay of an eager call would keep the first variant's launches
    defaults = knob_defaults(variants)
    rows = []
    for name in configs:
        cfg = named(name.split(":")[0])
        cfg = cfg.with_layers(layers) if layers else cfg
        model = bench.random_model(cfg, device=torch.device("cuda"), dtype=torch.bfloat16, fp8=name.endswith(":fp8"))
        for rnd in range(rounds):
            for variant, sets in variants:
                apply(defaults, sets)
                r = bench.run(model, repeats=1, **bench_kw)  # (rounds alternate the variants instead)
                rows.append(dict(config=name, variant=variant, round=rnd, decode_tps=r["decode_tps"]))
                print(f"{name:20s} {variant:28s} decode {r['decode_tps']:6.1f} tok/s", flush=True)
                if json_path:  # after every run: a call cut short keeps what it measured
                    with open(json_path, "w") as f:
                        json.dump(rows, f, indent=1)
        apply(defaults)
        model = None
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b")
    ap.add_argument("--variant", action="append", required=True, help="NAME:mod.ATTR=value;...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--layers", type=int, default=0, help="cut each config to this many layers (0: all)")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=256)
    args = ap.parse_args()
    run(args.configs.split(","), [parse(v) for v in args.variant], args.rounds, args.json, args.layers,
        batch=args.batch, prompt_len=args.prompt_len, new_tokens=args.new_tokens)


if __name__ == "__main__":
    main()
