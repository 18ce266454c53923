"""Where one column of the blocked LU's row panel spends its time (complex64, 256 rows, 16
columns a thread, 8 warps, 64 programs as for 64 matrices): a stand-alone kernel that repeats
the column step with parts swapped, timed on a GPU. Variants (``MODE``):

  0  the pivot search alone (``tl.reduce`` of (magnitude, place, row), as ``lu._lu_panel_rows``)
  1  the search, then the pivot row through memory (owner stores, barrier, every thread loads):
     the library's form
  2  as 1 with the search as one int64 maximum (magnitude bits and inverted place in one key)
  3  the pivot row carried through the search itself (one ``tl.reduce`` over the key and the 32
     row values: no memory round trip)
  4  the memory round trip alone (pivot row g, no search)
  5  as 1, but the update takes the row loaded a column earlier: the round trip off the chain
     (what a one-column look-ahead inside the panel would leave on it)
  6  as 5 with the pivot and the next two columns' entries (6 floats) carried by the search, as
     that look-ahead needs
  7  as 1 with each complex entry of the pivot row stored and loaded as one 64-bit word (16
     stores and loads a thread instead of 32)

The pivot row goes to a slot of its own a column (as the library writes it at row g): one
barrier a column.

Each program runs the 16 columns REPS times on its own 256x16 complex panel; the report is
nanoseconds a column (the kernel time / (16 * REPS)).

    PYTHONPATH=src python3 scripts/lu_column_probe.py [--reps 64]
"""
import argparse
import importlib.util
import os
import sys
import tempfile

import torch
import triton
import triton.language as tl

from fastpath.ops.linalg.lu import _pack64, _pivot_max, _unpack64

W = 16  # complex columns a panel

# the combine of variant 3 has 2 x (1 + 2W) arguments: generated into a module of its own (Triton reads
# a jitted function's source from its file)
def _carry_src(name, n):
    args = ["k"] + [f"v{i}" for i in range(n)]
    return f'''

@triton.jit
def {name}({", ".join(a + "1" for a in args)}, {", ".join(a + "2" for a in args)}):
    take = k2 > k1
    return {", ".join(f"tl.where(take, {a}2, {a}1)" for a in args)}
'''


_SRC = "import triton\nimport triton.language as tl\n" + _carry_src("carry_max", 2 * W) + _carry_src("carry6", 6)


def _combine_module():
    path = os.path.join(tempfile.mkdtemp(), "lu_probe_combine.py")
    with open(path, "w") as f:
        f.write(_SRC)
    spec = importlib.util.spec_from_file_location("lu_probe_combine", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lu_probe_combine"] = mod
    spec.loader.exec_module(mod)
    return mod.carry_max, mod.carry6


carry_max, carry6 = _combine_module()


@triton.jit
def _key(mag, pos, ok):
    """int64 key: larger magnitude first, then the earlier place; rows not searched lowest."""
    bits = mag.to(tl.int32, bitcast=True).to(tl.int64) + 1
    return tl.where(ok, (bits << 32) | (0xFFFFFFFF - pos.to(tl.int64)), 0)


@triton.jit
def _probe_kernel(a_ptr, out_ptr, reps, M: tl.constexpr, WC: tl.constexpr, MODE: tl.constexpr):
    base = a_ptr + tl.program_id(0).to(tl.int64) * M * WC * 2
    r = tl.arange(0, M)
    cr = ()
    ci = ()
    for c in tl.static_range(WC):
        cr = cr + (tl.load(base + r * WC * 2 + 2 * c),)
        ci = ci + (tl.load(base + r * WC * 2 + 2 * c + 1),)
    pos = r
    acc = tl.zeros([M], dtype=tl.float32)
    slots = out_ptr + tl.program_id(0).to(tl.int64) * WC * WC * 2
    hr = ()
    hi = ()
    for c in tl.static_range(WC):
        hr = hr + (tl.load(slots + 2 * c),)
        hi = hi + (tl.load(slots + 2 * c + 1),)
    for it in range(0, reps * WC):
        j = it % WC
        g = j
        xr = cr[0]
        xi = ci[0]
        for c in tl.static_range(1, WC):
            xr = tl.where(j == c, cr[c], xr)
            xi = tl.where(j == c, ci[c], xi)
        mag = tl.abs(xr) + tl.abs(xi)
        ok = pos >= g
        prr = ()
        pri = ()
        if MODE == 0 or MODE == 1 or MODE == 5 or MODE == 7:
            m_ = tl.where(ok, mag, -1.0)
            _, pp, prow = tl.reduce((m_, pos, r), 0, _pivot_max)
            is_p = r == prow
        elif MODE == 2:
            key = tl.max(_key(mag, pos, ok), axis=0)
            pp = (0xFFFFFFFF - (key & 0xFFFFFFFF)).to(tl.int32)
            is_p = pos == pp
        elif MODE == 3:
            vals = tl.reduce((_key(mag, pos, ok),) + cr + ci, 0, carry_max)
            key = vals[0]
            pp = (0xFFFFFFFF - (key & 0xFFFFFFFF)).to(tl.int32)
            is_p = pos == pp
            for c in tl.static_range(WC):
                prr = prr + (vals[1 + c],)
                pri = pri + (vals[1 + WC + c],)
        elif MODE == 6:
            vals = tl.reduce((_key(mag, pos, ok), xr, xi, cr[1], ci[1], cr[2], ci[2]), 0, carry6)
            key = vals[0]
            pp = (0xFFFFFFFF - (key & 0xFFFFFFFF)).to(tl.int32)
            is_p = pos == pp
            acc += vals[1] * 1e-30 + vals[3] * 1e-30 + vals[5] * 1e-30
        else:
            pp = g
            is_p = r == g
        if MODE == 1 or MODE == 2 or MODE == 4 or MODE == 5 or MODE == 6:
            row = slots + j * WC * 2
            for c in tl.static_range(WC):
                tl.store(row + r * 0 + 2 * c, cr[c], mask=is_p)
                tl.store(row + r * 0 + 2 * c + 1, ci[c], mask=is_p)
            tl.debug_barrier()
            for c in tl.static_range(WC):
                prr = prr + (tl.load(row + 2 * c),)
                pri = pri + (tl.load(row + 2 * c + 1),)
        if MODE == 7:
            row64 = (slots + j * WC * 2).to(tl.pointer_type(tl.int64))
            for c in tl.static_range(WC):
                tl.store(row64 + r * 0 + c, _pack64(cr[c], ci[c]), mask=is_p)
            tl.debug_barrier()
            for c in tl.static_range(WC):
                yr, yi = _unpack64(tl.load(row64 + c))
                prr = prr + (yr,)
                pri = pri + (yi,)
        if MODE == 5 or MODE == 6:  # this column's update takes the row loaded a column ago
            nr = prr
            ni = pri
            prr = hr
            pri = hi
            hr = nr
            hi = ni
        if MODE == 0:  # the thread's own row stands in for the pivot row (no exchange)
            prr = cr
            pri = ci
        pos = tl.where(is_p, g, tl.where(pos == g, pp, pos))
        # an update of the same shape as the panel's (kept small: the panel must not blow up)
        lr = xr * 1e-3
        li = xi * 1e-3
        ncr = ()
        nci = ()
        for c in tl.static_range(WC):
            ncr = ncr + (tl.where(pos > g, cr[c] - (lr * prr[c] - li * pri[c]), cr[c]),)
            nci = nci + (tl.where(pos > g, ci[c] - (lr * pri[c] + li * prr[c]), ci[c]),)
        cr = ncr
        ci = nci
        acc += lr
    for c in tl.static_range(WC):
        tl.store(base + r * WC * 2 + 2 * c, cr[c] + acc)
        tl.store(base + r * WC * 2 + 2 * c + 1, ci[c])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=64)
    ap.add_argument("--modes", default="0,1,2,3,4,5,6,7")
    ap.add_argument("--warps", default="8,4", help="warps a program (8: a row a thread, 4: two)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    a = torch.randn(64, 256, W, 2, device=dev)
    out = torch.zeros(64, W, W, 2, device=dev)
    names = {0: "search only", 1: "search + row through memory (library)", 2: "int64-key search + memory",
             3: "row carried by the search", 4: "memory round trip only",
             5: "memory off the chain (look-ahead bound)", 6: "as 5 + 6 floats carried",
             7: "as 1, 64-bit words"}
    for mode, warps in [(m, w) for w in map(int, args.warps.split(",")) for m in map(int, args.modes.split(","))]:
        try:
            run = lambda: _probe_kernel[(64,)](a, out, args.reps, M=256, WC=W, MODE=mode, num_warps=warps)  # noqa: E731
            run()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            best = float("inf")
            for _ in range(5):
                start.record()
                run()
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end))
            print(f"MODE {mode} {names[mode]:<40} {warps} warps: {best * 1e6 / (W * args.reps):7.1f} ns a column",
                  flush=True)
        except Exception as exc:  # noqa: BLE001 - one failing variant must not stop the others
            print(f"MODE {mode} {names[mode]} {warps} warps: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)


if __name__ == "__main__":
    main()
