"""Two one-row projections back to back in a CUDA graph, timed under settings of the late PDL
trigger (``FASTPATH_PDL=3``): does a projection that lets its successor launch early slow that
successor down? (The thirty-ninth session's guess: a split-K projection's successor crowds the
multiprocessors its first finished programs free.)

    PYTHONPATH=src python3 scripts/pdl_pair_probe.py [--pairs 12288x4096:4096x6144,...] [--rounds 3]
        [--variant "name:module.KNOB=value;..."]...

A pair ``K1xN1:K2xN2`` runs ``y = linear(x, W1)`` (W1 N1 x K1) then ``linear(y or x2, W2)`` (the
first output feeds the second when K2 == N1), bf16, 20 pairs a graph replay; prints us a pair,
variants alternated round by round (knobs as in scripts/knob_ab.py; the graph timed as in
scripts/tune_batch_norm.py, median of 20 replays).
"""
import argparse

import torch

from fastpath._core import memo
from fastpath.ops.linear import linear
from fastpath.ops.matvec import _MV
from knob_ab import apply, knob_defaults, parse
from tune_batch_norm import graph_us

DEFAULT_PAIRS = "12288x4096:4096x6144,4096x4096:4096x24576,4096x2048:2048x5120,12288x4096:4096x4096"


def pair_us(k1: int, n1: int, k2: int, n2: int, reps: int = 20, replays: int = 20) -> float:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(1, k1, device=dev, generator=g).bfloat16()
    w1 = (torch.randn(n1, k1, device=dev, generator=g) / k1 ** 0.5).bfloat16()
    w2 = (torch.randn(n2, k2, device=dev, generator=g) / k2 ** 0.5).bfloat16()
    x2 = torch.randn(1, k2, device=dev, generator=g).bfloat16()

    def pairs():
        for _ in range(reps):
            y = linear(x, w1)
            linear(y if k2 == n1 else x2, w2)

    return graph_us(pairs, None, replays) / reps


def resources() -> None:
    """Each compiled matrix-vector kernel's blocks, stages, warps, registers a thread and shared
    memory a program (what bounds its programs a multiprocessor)."""
    for key, (kernel, _) in _MV.kernels.items():
        kw = dict(item for item in key[2] if isinstance(item, tuple) and len(item) == 2)
        blocks = {k: kw.get(k) for k in ("BLOCK_N", "BLOCK_K", "STAGES", "SPLIT", "num_warps")}
        print(f"    {blocks} registers {getattr(kernel, 'n_regs', '?')} shared {kernel.metadata.shared} B", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default=DEFAULT_PAIRS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variant", action="append", default=[])
    p.add_argument("--resources", action="store_true",
                   help="after each variant's first pair: registers, shared memory and blocks of every "
                   "matvec kernel compiled")
    args = p.parse_args()
    memo.ENABLED = False  # a replayed eager call would keep the first variant's launches
    variants = [parse(v) for v in args.variant] or [parse("default:")]
    defaults = knob_defaults(variants)
    for spec in args.pairs.split(","):
        (k1, n1), (k2, n2) = [tuple(int(v) for v in part.split("x")) for part in spec.split(":")]
        for rnd in range(args.rounds):
            for name, sets in variants:
                apply(defaults, sets)
                print(f"{spec:24s} round {rnd} {name:28s} {pair_us(k1, n1, k2, n2):8.2f} us a pair", flush=True)
                if args.resources and rnd == 0:
                    resources()
    apply(defaults)


if __name__ == "__main__":
    main()
