"""A/B of where a decoder layer's RMSNorm runs, inside the decode engine (one process,
alternating): its own kernel; inside the router only (``moe.FUSE_NORM``); inside the router
and the projections (``linear.FUSE_NORM``): the row read first, up to a weight size
(``linear.NORM_FUSE_MAX_ELEMS``), or the rstd deferred to the sums (``linear.NORM_DEFER``).
Prints decode tok/s of each, twice. (Its first two runs, f807f63 and a85eb17, also timed the
one-row projections on the 16-row dot, since removed: 327 / 331 against 347 / 352 tok/s.)

    PYTHONPATH=src python3 scripts/norm_fusion_ab.py [--configs qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b]
        [--variants NAME,...] [--json OUT]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from knob_ab import parse, run  # noqa: E402

#: name: knob settings (linear.FUSE_NORM, moe.FUSE_NORM, linear.NORM_DEFER, linear.NORM_FUSE_MAX_ELEMS: the
#: size limit of the row-first form, the only one with NORM_DEFER off)
_ROW_FIRST = "linear.FUSE_NORM=True;moe.FUSE_NORM=True;linear.NORM_DEFER=False;linear.NORM_FUSE_MAX_ELEMS="
VARIANTS = {"own kernel": "linear.FUSE_NORM=False;moe.FUSE_NORM=False",
            "router": "linear.FUSE_NORM=False;moe.FUSE_NORM=True",
            "router+proj row first<=16M": _ROW_FIRST + "16777216",
            "router+proj row first<=32M": _ROW_FIRST + "33554432",
            "router+proj deferred": "linear.FUSE_NORM=True;moe.FUSE_NORM=True;linear.NORM_DEFER=True"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="qwen3-30b-a3b,qwen3-30b-a3b:fp8,qwen3-8b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="names of VARIANTS, comma-separated")
    ap.add_argument("--router-blocks", default="", help="moe.ROUTER_BLOCK_N values to A/B too, e.g. 2,4,8")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    specs = [f"{v}:{VARIANTS[v]}" for v in args.variants.split(",") if v]
    specs += [f"router+proj deferred, router rows {b}:{VARIANTS['router+proj deferred']};moe.ROUTER_BLOCK_N={int(b)}"
              for b in args.router_blocks.split(",") if b]
    run(args.configs.split(","), [parse(s) for s in specs], args.rounds, args.json)


if __name__ == "__main__":
    main()
