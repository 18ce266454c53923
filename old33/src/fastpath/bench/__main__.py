"""``python -m fastpath.bench [suite ...] [--json PATH] [--graphs] [--quick] [--only TEXT] [--list]``.

On a CUDA GPU: measures the ceilings, then checks and times every case of the selected
suites (default: all) against the PyTorch-native way, prints a table and appends one JSON
line per row to ``bench/results/<date>-<gpu>.jsonl``. Without a GPU: checks each case at a
tiny size on the CPU (reference path, or Triton's interpreter with ``TRITON_INTERPRET=1``).
Exit code: 0 if every check passed, 1 if one failed, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import shlex
import sys

from . import SUITES, load_cases

COLUMNS = [("suite", 9), ("case", 24), ("shape", 13), ("dtype", 8), ("mode", 5), ("l2", 4),
           ("ours_us", 9), ("torch_us", 9), ("ratio", 8), ("gbps", 6), ("pct_copy", 6), ("target", 11)]
TITLES = {"ours_us": "ours us", "torch_us": "torch us", "gbps": "GB/s", "pct_copy": "%copy"}


def _cell(key, v) -> str:
    if v is None:
        return "-"
    if key == "shape":
        return "x".join(map(str, v))
    if key == "ratio":
        return f"{v:.2f}x"
    if key == "gbps":
        return f"{v:.0f}"
    if key == "pct_copy":
        return f"{v:.1f}"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def header() -> str:
    return " ".join(TITLES.get(k, k).ljust(w) for k, w in COLUMNS) + " met  check"


def format_row(row: dict) -> str:
    met = {True: "yes", False: "NO", None: "-"}[row["met"]]
    status = ("ok: " if row["ok"] else "FAIL: ") + row["check"]
    return " ".join(_cell(k, row[k]).ljust(w) for k, w in COLUMNS) + f" {met:<4} {status}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fastpath.bench",
                                description="Time fastpath against PyTorch on a CUDA GPU.")
    p.add_argument("suites", nargs="*", metavar="suite",
                   help=f"suites to run (default: all of {', '.join(SUITES)})")
    p.add_argument("--json", metavar="PATH",
                   help="append the JSON lines here (default: bench/results/<date>-<gpu>.jsonl)")
    p.add_argument("--graphs", action="store_true", help="also time a CUDA-graph mode for every case")
    p.add_argument("--quick", action="store_true", help="only a few cases")
    p.add_argument("--only", metavar="TEXT", help="only the cases whose name contains TEXT")
    p.add_argument("--list", action="store_true", help="list the suites and cases, run nothing")
    p.add_argument("--set", action="append", default=[], metavar="MODULE.KNOB=VALUE",
                   help="set a module-level knob first, for A/B runs (e.g. ops.loss.BWD_REVERSE=False); "
                        "the command recorded with each row carries it")
    return p


def apply_knobs(settings) -> None:
    """Each ``MODULE.KNOB=VALUE`` (module under ``fastpath``, VALUE a Python literal): set it,
    or raise ValueError naming what is wrong."""
    import ast
    import importlib
    for item in settings:
        target, eq, text = item.partition("=")
        module, _, knob = target.rpartition(".")
        if not (eq and module and knob):
            raise ValueError(f"--set: expected MODULE.KNOB=VALUE, got {item!r}")
        try:
            mod = importlib.import_module(f"fastpath.{module}")
        except ImportError as exc:
            raise ValueError(f"--set {item!r}: no module fastpath.{module} ({exc})") from None
        if not hasattr(mod, knob):
            raise ValueError(f"--set {item!r}: fastpath.{module} has no {knob}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(f"--set {item!r}: VALUE must be a Python literal (True, 8192, 'x'), got {text!r}") from None
        setattr(mod, knob, value)
        print(f"set fastpath.{module}.{knob} = {value!r}")


def cpu_check(cases) -> int:
    """Each case at its tiny size on the CPU, ours vs PyTorch; 0 if all pass."""
    import torch

    from .._core.backend import triton_reason
    from .harness import run_check
    why = triton_reason("cpu")
    if why is None:
        print("path checked: Triton interpreter")
    else:
        print(f"path checked: PyTorch reference ({why}); "
              "set TRITON_INTERPRET=1 to check the kernels in the interpreter")
    failed = 0
    for case in cases:
        torch.manual_seed(0)
        ok, detail, _, _ = run_check(case, case.make(case.cpu_shape, case.dtype, torch.device("cpu"), 0))
        failed += not ok
        shape = "x".join(map(str, case.cpu_shape))
        print(f"{'pass' if ok else 'FAIL'}  {case.suite:<9} {case.name:<24} {shape:<10} "
              f"{case.dtype:<9} {detail}")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def gpu_run(cases, args, command: str) -> int:
    from . import harness
    env = harness.environment(command)
    print(f"{env['gpu']} ({env['sms']} SMs), torch {env['torch']}, triton {env['triton']}, "
          f"python {env['python']}, commit {env['commit']}, {env['date']}")
    ceil = harness.measure_ceilings()
    print(f"ceilings: copy {ceil['copy_gbps']:.0f} GB/s "
          f"(read + write, {ceil['copy_bytes'] / 2**30:.0f} GiB), "
          f"bf16 matmul {ceil['matmul_bf16_tflops']:.0f} TFLOP/s ({ceil['matmul_n']}^3), "
          f"L2 {ceil['l2_bytes'] / 2**20:.0f} MiB")
    path = harness.results_path(env, args.json)
    print(f"appending to {path}\n{header()}", flush=True)
    timer = harness.Timer(ceil["l2_bytes"])
    rows = []

    def emit(row):
        rows.append(row)
        print(format_row(row), flush=True)
        harness.append_record(path, {**env, "ceilings": ceil, **row})

    for case in cases:
        try:
            for row in harness.run_case(case, timer, ceil, args.graphs):
                emit(row)
        except Exception as exc:  # e.g. out of memory making the inputs: a failed row, then go on
            emit(harness.make_row(case, "eager", "cold", None, None, False,
                                  f"harness: {harness.describe(exc)}", ceil["copy_gbps"]))
    failed = sum(not r["ok"] for r in rows)
    print(f"{failed} row(s) failed their check" if failed else "all checks passed")
    return 1 if failed else 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a bad option (argparse printed why)
        return exc.code if isinstance(exc.code, int) else 2
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        print(f"python -m fastpath.bench: error: unknown suite {', '.join(map(repr, unknown))} "
              f"(known: {', '.join(SUITES)})", file=sys.stderr)
        return 2
    try:
        apply_knobs(args.set)
    except ValueError as exc:
        print(f"python -m fastpath.bench: error: {exc}", file=sys.stderr)
        return 2
    cases = load_cases(list(dict.fromkeys(args.suites)), quick=args.quick)
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    if args.list:
        for c in cases:
            flags = [f for f in ("graphs", "hot", "quick") if getattr(c, f)]
            print(f"{c.suite:<9} {c.name:<24} {'x'.join(map(str, c.shape)):<13} {c.dtype:<9} "
                  f"{c.target_text or '':<11} {' '.join(flags)}")
        return 0
    import torch
    if not torch.cuda.is_available():
        print("no CUDA GPU found: timings need one; checking the reference/interpreter paths instead")
        return cpu_check(cases)
    return gpu_run(cases, args, shlex.join(["python", "-m", "fastpath.bench", *argv]))


if __name__ == "__main__":
    sys.exit(main())
