"""Sweep the elementwise kernels' (BLOCK, num_warps) on a GPU at the benchmark shapes.

Run on the GPU machine: ``PYTHONPATH=src python3 scripts/tune_elementwise.py [name ...]``
(names filter the cases by substring, e.g. ``eq take``). For every case, each candidate
configuration is first checked for exact equality with PyTorch on the case's inputs, then
timed cold-L2 (a 2x-L2 buffer read before each call, outside the timed interval) with
``fastpath.streams.median_ms``, next to the PyTorch-native way. One line per (case, config):
config, ours us, torch us, ratio (torch / ours), % of the copy bandwidth measured here
(fewest bytes / time). The first config of a case is the module's default rule; the
best is printed as the ``TUNED`` entry to make it the default in ``ops/elementwise.py``.
A config that fails (compile error, wrong answer) is reported and the sweep goes on.
The whole run stops starting new configs after BUDGET_S seconds (compilation included).
"""
from __future__ import annotations

import os
import sys
import time
import traceback

import torch

from fastpath.bench import elementwise as bew
from fastpath.ops import elementwise as ew
from fastpath.streams import _flush_buffer, median_ms

BUDGET_S = 70.0
REPS = 20
#: TUNE_ELEMENTWISE_SMOKE=1 TRITON_INTERPRET=1: a tiny dry run on the CPU (checks the script)
SMOKE = os.environ.get("TUNE_ELEMENTWISE_SMOKE") == "1"
N = 1 << 12 if SMOKE else 1 << 26  # 64M elements
M = N // 4  # take: indices
T0 = time.perf_counter()
DEV = torch.device("cpu" if SMOKE else "cuda")


def _sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()

# (label, TUNED key, dtype name, make(shape, dtype, dev, seed), ours, native, fewest bytes, candidates)
_CMP_NATIVE = {}


def _cmp(op, dtype, configs):
    def native(a, b):
        if (op, dtype) not in _CMP_NATIVE:
            _CMP_NATIVE[op, dtype] = bew._native_cmp(op, dtype)[0]
        return _CMP_NATIVE[op, dtype](a, b)
    bits = int(dtype[4:])
    out = bits // 8 if op in ("minimum", "maximum") else 1
    return (f"{op} {dtype} 64M", ("cmp", getattr(torch, dtype)), dtype, bew._unsigned,
            getattr(ew, op), native, N * (2 * bits // 8 + out), configs)


CASES = [
    ("frexp float32 64M (specials)", ("frexp", torch.float32), "float32", bew._floats(True), ew.frexp,
     torch.frexp, N * 12, [(1024, 4), (2048, 4), (2048, 8), (4096, 8), (1024, 8)]),
    ("frexp bfloat16 64M (specials)", ("frexp", torch.bfloat16), "bfloat16", bew._floats(True), ew.frexp,
     torch.frexp, N * 8, [(2048, 4), (4096, 4), (4096, 8), (8192, 8), (1024, 4)]),
    ("heaviside float32 64M", ("heaviside", torch.float32), "float32", bew._floats(False), ew.heaviside,
     torch.heaviside, N * 12, [(1024, 4), (2048, 4), (2048, 8), (4096, 8)]),
    _cmp("lt", "uint32", [(1024, 4), (2048, 4), (2048, 8), (4096, 8)]),
    _cmp("ge", "uint64", [(512, 4), (1024, 4), (1024, 8), (2048, 8)]),
    _cmp("eq", "uint8", [(4096, 4), (4096, 8), (8192, 4), (8192, 8), (16384, 8)]),
    _cmp("maximum", "uint64", [(512, 4), (1024, 4), (2048, 8)]),
    _cmp("minimum", "uint16", [(2048, 4), (4096, 4), (4096, 8), (8192, 8)]),
    ("take 16M of 64M float32 (validate=False)", ("take", torch.float32), "float32", bew._take_inputs,
     lambda x, i: ew.take(x, i, validate=False), torch.take, M * 16,
     [(512, 4), (1024, 4), (2048, 4), (2048, 8), (4096, 8)]),
]


def _default(key, bpe_bytes, n):
    saved = ew.TUNED.pop(key, None)
    try:
        _, block, warps = ew._config(key[0], key[1], bpe_bytes, n)
    finally:
        if saved is not None:
            ew.TUNED[key] = saved
    return block, warps


def _time_us(fn, inputs) -> float:
    flush = _flush_buffer(DEV).sum
    for _ in range(2):
        fn(*inputs)
    _sync()
    return 1e3 * median_ms(lambda: fn(*inputs), REPS, before=flush, device=DEV)


def copy_gbps() -> float:
    src = torch.empty(N * 4, device=DEV)  # 1 GiB
    dst = torch.empty_like(src)
    dst.copy_(src)
    ms = median_ms(lambda: dst.copy_(src), 10, device=DEV)
    return 2 * src.nbytes / ms / 1e6


def out_of_time() -> bool:
    return time.perf_counter() - T0 > BUDGET_S


def run_case(case, gbps):
    label, key, dtype, make, ours, native, nbytes, configs = case
    n = M if key[0] == "take" else N
    shape = (N, M) if key[0] == "take" else (N,)
    inputs = make(shape, dtype, DEV, 0)
    ref = native(*inputs)
    torch_us = _time_us(native, inputs)
    per_elem = nbytes // n
    default = _default(key, per_elem, n)
    cands = [default] + [c for c in configs if c != default]
    results = []
    for block, warps in cands:
        tag = f"BLOCK={block:<5d} w{warps}" + (" (default)" if (block, warps) == default else "")
        if out_of_time():
            print(f"{label:42s} | {tag:24s} | skipped: time budget")
            continue
        ew.TUNED[key] = (block, warps)
        try:
            ok, detail = bew._exact(inputs, ours(*inputs), ref)
            if not ok:
                print(f"{label:42s} | {tag:24s} | WRONG: {detail}")
                continue
            us = _time_us(ours, inputs)
        except Exception as exc:  # reported, the sweep goes on
            print(f"{label:42s} | {tag:24s} | FAILED: {type(exc).__name__}: {str(exc).strip()[:200]}")
            continue
        finally:
            ew.TUNED.pop(key, None)
        pct = 100 * nbytes / (us * 1e-6) / (gbps * 1e9)
        results.append((us, block, warps))
        print(f"{label:42s} | {tag:24s} | ours {us:8.1f} us | torch {torch_us:8.1f} us | "
              f"{torch_us / us:5.2f}x | {pct:5.1f}% copy", flush=True)
    if results:
        us, block, warps = min(results)
        print(f"{'':42s}   best: TUNED[({key[0]!r}, torch.{dtype})] = ({block}, {warps})  # {us:.1f} us")
    if key[0] == "take" and not out_of_time():
        take_breakdown(inputs, ref, torch_us, nbytes, gbps)


def take_breakdown(inputs, ref, torch_us, nbytes, gbps):
    """validate=True (one flag word, one .item()) against validate=False, and where the
    difference goes: host time of a call, and the bare device->host sync round trip."""
    x, i = inputs
    try:
        ok, detail = bew._exact(inputs, ew.take(x, i), ref)
        us = _time_us(lambda a, b: ew.take(a, b), inputs)
        print(f"{'take 16M of 64M float32 (validate=True)':42s} | {'default':24s} | ours {us:8.1f} us | "
              f"torch {torch_us:8.1f} us | {torch_us / us:5.2f}x | "
              f"{100 * nbytes / (us * 1e-6) / (gbps * 1e9):5.1f}% copy | check {detail}")
        _sync()
        t = time.perf_counter()
        for _ in range(20):
            ew.take(x, i, validate=False)
        host_us = (time.perf_counter() - t) / 20 * 1e6  # launches only (the GPU queue absorbs them)
        _sync()
        word = torch.zeros(1, dtype=torch.int32, device=DEV)
        sync_us = 1e3 * median_ms(lambda: word.item(), REPS, device=DEV)
        print(f"{'':42s}   host us per validate=False call {host_us:.1f}; bare .item() round trip "
              f"{sync_us:.1f} us (device-idle time a sync adds to the interval)")
    except Exception:
        traceback.print_exc(limit=2)


def main(argv):
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0) if DEV.type == 'cuda' else 'CPU dry run'}")
    gbps = copy_gbps()
    print(f"copy bandwidth (read + write) {gbps:.0f} GB/s; budget {BUDGET_S:.0f} s")
    for case in CASES:
        if argv and not any(a in case[0] for a in argv):
            continue
        if out_of_time():
            print(f"{case[0]:42s} | skipped: time budget")
            continue
        try:
            run_case(case, gbps)
        except Exception as exc:  # inputs or the torch side failed: next case
            print(f"{case[0]:42s} | FAILED: {type(exc).__name__}: {str(exc).strip()[:200]}")
        torch.cuda.empty_cache()
    print(f"total {time.perf_counter() - T0:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
