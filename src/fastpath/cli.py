"""The ``fastpath`` command line: ``fastpath info`` and ``fastpath bench [suite ...]``."""
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
    if not argv:
        parser.print_help()
        return 2
    if argv[0] == "bench":
        from .bench.__main__ import main as bench_main
        return bench_main(argv[1:])
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
