"""GPU sweep of ``grouped_mm``'s decode-like plans (``--knob DECODE_PLAN``, the tiled kernel's, or
``ROWS_PLAN``, its one-row mode, switched on by ``ROWS_UP_TO``: BLOCK_N, BLOCK_K, warps, stages)
on the moe bench's ``grouped_mm gate_up`` inputs (Qwen3-30B-A3B: 128 experts, top-8, hidden
2048, expert width 768, bf16), one CUDA graph a call, L2 flushed before each replay;
``torch._grouped_mm`` in the same run for the ratio.

    PYTHONPATH=src python3 scripts/tune_grouped_mm.py [--tokens 1,8] [--plans "[(64,128,4,4),...]"] [--rounds 2]
        [--knob ROWS_PLAN]
"""
import argparse
import ast

import torch

from fastpath._core import memo
from fastpath.bench.moe import QWEN3_30B, _gmm_inputs
from fastpath.ops import grouped_mm as G
from fastpath.streams import _flush_buffer
from tune_batch_norm import graph_us

PLANS = [(64, 128, 4, 4), (32, 128, 4, 4), (32, 256, 4, 3), (32, 256, 4, 4), (16, 256, 4, 4), (16, 512, 4, 3),
         (32, 128, 2, 4), (64, 256, 4, 3), (32, 64, 4, 6), (16, 256, 2, 4), (32, 256, 8, 3), (64, 128, 4, 5),
         (64, 64, 4, 6), (128, 64, 4, 4)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="1,8")
    p.add_argument("--plans", default=None)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--knob", default="DECODE_PLAN", choices=["DECODE_PLAN", "ROWS_PLAN"])
    args = p.parse_args()
    memo.ENABLED = False
    dev = torch.device("cuda")
    flush = _flush_buffer(dev)
    plans = ast.literal_eval(args.plans) if args.plans else PLANS
    default, rows_up_to = getattr(G, args.knob), G.ROWS_UP_TO
    G.ROWS_UP_TO = 10 ** 6 if args.knob == "ROWS_PLAN" else None
    for T in (int(t) for t in args.tokens.split(",")):
        a, b, offs = _gmm_inputs((T,) + QWEN3_30B, "bfloat16", dev, 0)
        ref = torch._grouped_mm(a, b, offs=offs)
        for rnd in range(args.rounds):
            torch_us = graph_us(lambda: torch._grouped_mm(a, b, offs=offs), lambda: flush.sum(), 50)
            print(f"tokens {T} round {rnd} torch._grouped_mm {torch_us:7.2f} us", flush=True)
            for plan in plans:
                setattr(G, args.knob, plan)
                try:
                    err = (G.grouped_mm(a, b, offs=offs).float() - ref.float()).abs().max().item()
                    us = graph_us(lambda: G.grouped_mm(a, b, offs=offs), lambda: flush.sum(), 50)
                    print(f"tokens {T} round {rnd} {args.knob} {str(plan):20s} {us:7.2f} us  {torch_us / us:5.2f}x"
                          f"  max |diff| {err:.3g}", flush=True)
                except Exception as exc:  # noqa: BLE001 - a plan that does not compile is reported
                    print(f"tokens {T} round {rnd} plan {plan}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
    setattr(G, args.knob, default)
    G.ROWS_UP_TO = rows_up_to


if __name__ == "__main__":
    main()
