"""The ``fastpath`` command line: ``generate``, ``bench-decode``, ``info``, ``bench [suite ...]``."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="fastpath", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p_info = sub.add_parser("info", help="versions, GPU, and which path each op takes here")
    p_info.add_argument("--device", default=None, help="device to report for (default: cuda if present)")
    p_info.add_argument("--json", action="store_true", help="print the report as JSON")
    sub.add_parser("bench", help="run the benchmark suites (python -m fastpath.bench --help)",
                   add_help=False)
    g = sub.add_parser("generate", help="generate text with a Hugging Face checkpoint (default: the embedded one)")
    g.add_argument("--model", default=None, help="checkpoint directory (default: the small embedded model)")
    g.add_argument("--prompt", default=None, help="prompt text (default: a fixed one for the embedded model)")
    g.add_argument("--max-new-tokens", type=int, default=120)
    g.add_argument("--temperature", type=float, default=0.7, help="0 = greedy")
    g.add_argument("--top-k", type=int, default=50)
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--no-thinking", action="store_true",
                   help="with --chat: enable_thinking=False for templates that read it (Qwen3); without it the "
                        "template's own default, as transformers renders it")
    _model_args(g)
    b = sub.add_parser("bench-decode", help="prefill/decode tok/s, bytes per token, %% of roofline (JSON record)")
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="checkpoint directory")
    src.add_argument("--config", help="named shapes: " + ", ".join(_named()))
    b.add_argument("--random-weights", action="store_true", help="random weights (with --config)")
    b.add_argument("--batch", type=int, default=1)
    b.add_argument("--layers", type=int, default=None, help="keep only the first N layers")
    b.add_argument("--prompt-len", type=int, default=512)
    b.add_argument("--new-tokens", type=int, default=256)
    b.add_argument("--hf", action="store_true", help="also time transformers on the same shapes (eager)")
    b.add_argument("--json", default=None, help="results file (default bench/results/<date>-<gpu>.jsonl)")
    _model_args(b)
    if not argv:
        parser.print_help()
        return 2
    if argv[0] == "bench":
        from .bench.__main__ import main as bench_main
        return bench_main(argv[1:])
    args = parser.parse_args(argv)
    args.argv = argv  # recorded with benchmark results, also when main() is given its arguments
    if args.command in ("generate", "bench-decode"):
        from .engine import commands
        try:
            return (commands.generate if args.command == "generate" else commands.bench_decode)(args)
        except (FileNotFoundError, NotImplementedError, ValueError, MemoryError) as e:
            print(f"fastpath {args.command}: error: {e}", file=sys.stderr)
            return 1
    if args.command == "info":
        from .info import info
        if args.json:
            import json
            print(json.dumps(info(args.device, file=False), indent=2))
        else:
            info(args.device)
        return 0
    parser.print_help()
    return 2


def _named() -> list:
    from .models.config import NAMED
    return list(NAMED)


def _model_args(p) -> None:
    p.add_argument("--fp8", action="store_true", default=None,
                   help="FP8 weights (quantised on load, per-row scales); the default for FP8 checkpoints")
    p.add_argument("--no-fp8", dest="fp8", action="store_false",
                   help="an FP8 checkpoint's weights dequantised to --dtype as they load")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", default=None, choices=["bfloat16", "float16", "float32"],
                   help="default: bfloat16 on GPUs, float32 on the CPU")


if __name__ == "__main__":
    sys.exit(main())
