"""Sweep the bincount kernel's knobs on a GPU, on the benchmark's bincount cases.

Run on the GPU machine from the repository root:

    PYTHONPATH=src python3 scripts/tune_bincount.py [--reps N] [--budget SECONDS]

(``TRITON_INTERPRET=1 ... --smoke`` runs the same sweep on the CPU at the cases' tiny sizes,
to check the script itself.)

For each case of ``python -m fastpath.bench training`` whose name starts with "bincount" (same
inputs, same checks) and each candidate configuration of the module-level knobs of
``fastpath.ops.bincount``: check the result against ``torch.bincount``, then time it with
``fastpath.streams.median_ms`` behind a cold-L2 flush (a read of twice the L2), next to the
torch op timed the same way. One line per (case, config): ours us, torch us, ratio (torch /
ours), %copy (fewest bytes / time / copy bandwidth), check. A config that fails is printed
and skipped; each case's configs start within its share of ``--budget`` (default 80 s).
The best config of each case is listed at the end: the lead turns it into the defaults.
"""
from __future__ import annotations

import argparse
import time

import torch
import triton

from fastpath._core import launch
from fastpath.bench import training
from fastpath.ops import bincount as bc
from fastpath.streams import _flush_buffer, median_ms

COPY_GBPS = 4246.0  # H200 device-to-device copy, read + write (docs/perf-notes.md)
KNOBS = ("BLOCK", "NUM_WARPS", "PROGS_PER_SM", "COPIES", "WINDOW", "HIST_MAX", "SMEM", "SMEM_PLAN",
         "SMEM_COPIES")

# Candidates: changes to the defaults (the first, {}, is the defaults themselves).
#: Shared-memory histograms: (tile, warps, programs per SM), and off (the global atomics).
SHARED = [{}, {"SMEM_PLAN": (4096, 16, 1)}, {"SMEM_PLAN": (2048, 8, 4)}, {"SMEM_PLAN": (1024, 4, 8)},
          {"SMEM_COPIES": 4}, {"SMEM_COPIES": 64}, {"SMEM": False}]
ATOMIC = SHARED + [{"SMEM": False, "WINDOW": 0}, {"SMEM": False, "WINDOW": 32}]
WEIGHTED = SHARED + [{"SMEM": False, "PROGS_PER_SM": 4}]
REGISTER = [{}, {"PROGS_PER_SM": 4}, {"BLOCK": 2048, "NUM_WARPS": 8, "PROGS_PER_SM": 4},
            {"BLOCK": 512, "PROGS_PER_SM": 16}, {"COPIES": 32}, {"HIST_MAX": 0}, {"HIST_MAX": 0, "WINDOW": 32}]


def candidates(case) -> list:
    if "weighted" in case.name:
        return WEIGHTED
    return REGISTER if case.shape[1] < bc.HIST_MAX else ATOMIC


def describe(cfg: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items()) or "defaults"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20, help="timed calls per measurement (median)")
    ap.add_argument("--budget", type=float, default=80.0, help="seconds after which no new config starts")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes (with TRITON_INTERPRET=1)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    dev = torch.device("cpu" if args.smoke else "cuda")
    defaults = {k: getattr(bc, k) for k in KNOBS}
    name = "CPU (interpreter)" if args.smoke else torch.cuda.get_device_name(dev)
    print(f"{name}, torch {torch.__version__}, triton {triton.__version__}; defaults: {describe(defaults)}")
    flush = _flush_buffer(dev).sum if dev.type == "cuda" else None
    cases = [c for c in training.cases() if c.name.startswith("bincount")]
    best = {}
    print(f"{'case':<30} {'shape':<16} {'config':<48} {'ours us':>9} {'torch us':>9} {'ratio':>6} {'%copy':>6}  check")
    for i, case in enumerate(cases):
        deadline = t0 + args.budget * (i + 1) / len(cases)  # each case its share; unused time carries on
        shape = case.cpu_shape if args.smoke else case.shape
        label = f"{case.name:<30} {str(shape):<16}"
        inputs = case.make(shape, case.dtype, dev, 0)
        nbytes = case.nbytes(shape, 8)
        try:
            for _ in range(2):
                case.native(*inputs)
            torch_us = 1e3 * median_ms(lambda: case.native(*inputs), args.reps, flush, dev)
        except Exception as exc:  # noqa: BLE001 - reported, never hidden
            print(f"{label} torch failed: {type(exc).__name__}: {exc}")
            torch_us = float("nan")
        for cfg in candidates(case):
            if time.perf_counter() > deadline:
                print(f"{label} {describe(cfg):<48} skipped: time budget spent")
                continue
            try:
                for k, v in cfg.items():
                    setattr(bc, k, v)
                launch._workspaces.clear()  # fresh zeroed counters, whatever a failed config left
                ok, detail = case.check(inputs, case.ours(*inputs), case.native(*inputs))
                if not ok:
                    print(f"{label} {describe(cfg):<48} WRONG: {detail}")
                    continue
                case.ours(*inputs)
                us = 1e3 * median_ms(lambda: case.ours(*inputs), args.reps, flush, dev)
                pct = 100.0 * nbytes / (us * 1e-6) / (COPY_GBPS * 1e9)
                print(f"{label} {describe(cfg):<48} {us:9.1f} {torch_us:9.1f} {torch_us / us:6.2f} {pct:6.1f}  "
                      f"{detail}", flush=True)
                if label not in best or us < best[label][0]:
                    best[label] = (us, describe(cfg), torch_us)
            except Exception as exc:  # noqa: BLE001 - one failing config must not stop the sweep
                msg = " ".join(str(exc).split())[:200]
                print(f"{label} {describe(cfg):<48} FAILED: {type(exc).__name__}: {msg}")
            finally:
                for k, v in defaults.items():
                    setattr(bc, k, v)
    print("\nbest per case:")
    for label, (us, cfg, torch_us) in best.items():
        print(f"  {label} {us:9.1f} us ({torch_us / us:.2f}x torch)  {cfg}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
