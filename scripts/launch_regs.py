"""Registers, spills and shared memory of the matrix-vector kernels as the H200 launches them,
without a GPU: ``linear`` / ``linear_swiglu`` are called on CPU tensors with the plan of a
132-SM GPU (``matvec.INTERPRET`` off for the plan), each launch is recorded instead of run
(``scripts/compile_sm90.py``'s recorder, in a child process under the interpreter), compiled
for sm_90 with the installed Triton and read by ``ptxas -v``; programs a multiprocessor follow
from registers (64K a multiprocessor) and shared memory (228 KB). Hand-built kernel signatures guess constexprs and specialisations
wrong (perf-notes, twenty-sixth session); recorded launches do not. Caveat: fp8 weights take
the CPU's load mode (bytes reinterpreted, ``B_MODE`` 2), not necessarily the GPU's.

    PYTHONPATH=src [ROWS=4] python scripts/launch_regs.py [--mode1] 4096x28672x1x1 2048x5120x0x0x1
        (K x N x swiglu x fp8 [x norm]: rms_norm_linear with a residual; ROWS: rows of x, 1 by default)

``--mode1``: fp8 weights compiled in the load mode the H200 takes (``B_MODE`` 1, float8 pointers)
instead of the CPU's, and each loop's SASS instruction count printed: compare two trees (e.g. a
``git archive`` of an older commit on ``PYTHONPATH``) after a refactor of a hot kernel.
"""
import os
import pickle
import re
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compile_sm90 as C  # noqa: E402

from fastpath._core import launch as LA  # noqa: E402
from fastpath.ops import linear as L  # noqa: E402
from fastpath.ops import matvec  # noqa: E402

SMS, REGS_PER_SM, SMEM_PER_SM = 132, 65536, 228 * 1024


def record(K: int, N: int, swiglu: int, fp8: int, norm: int = 0) -> list:
    """The recorded launches (compile_sm90's tuples) of one call with the 132-SM plan (``norm``:
    ``rms_norm_linear`` with a residual, the decode layers' fused norm)."""
    C._SEEN.clear()
    saved = (matvec.INTERPRET, matvec.num_sms, L.num_sms, C._ORIG, LA.Launcher.launch)
    matvec.INTERPRET, matvec.num_sms, L.num_sms = False, (lambda dev: SMS), (lambda dev: SMS)
    C._ORIG, LA.Launcher.launch = (lambda self, grid, args, kwargs: None), C._record
    try:
        x = torch.randn(int(os.environ.get("ROWS", "1")), K, dtype=torch.bfloat16)
        rows = 2 * N if swiglu else N
        w = torch.zeros(rows, K).to(torch.float8_e4m3fn if fp8 else torch.bfloat16)
        s = torch.ones(rows, 1) if fp8 else None
        if norm:
            L.rms_norm_linear(x, torch.ones(K, dtype=torch.bfloat16), 1e-6, w, residual=torch.randn_like(x),
                              weight_scale=s, swiglu=bool(swiglu))
        else:
            (L.linear_swiglu if swiglu else L.linear)(x, w, weight_scale=s)
    finally:
        matvec.INTERPRET, matvec.num_sms, L.num_sms, C._ORIG, LA.Launcher.launch = saved
    return list(C._SEEN.values())


def _loops(cubin: str) -> list:
    """SASS instruction count of each loop of a compiled kernel."""
    import triton
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True).stdout
    return [len(body) for _, _, body in C.sass_loops(sass)]


def compile_one(item, mode1: bool = False) -> str:
    """``registers, spills, shared memory, programs a multiprocessor`` of one recorded launch
    (``mode1``: fp8 weights in the GPU's load mode, and the loops' instruction counts)."""
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    name, sig, consts, attrs, opts = item
    mod, fname = name.rsplit(".", 1)
    fn = getattr(importlib.import_module(mod), fname)
    names = list(sig)
    if mode1 and "B_MODE" in names and consts.get((names.index("B_MODE"),)) == 2:
        consts = {**consts, (names.index("B_MODE"),): 1}
        sig = {**sig, "b_ptr": "*fp8e4nv"}
    k = triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=opts)
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "k.ptx"), "w") as f:
            f.write(k.asm["ptx"])
        cubin = os.path.join(tmp, "k.cubin")
        info = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", f.name, "-o", cubin],
                              capture_output=True, text=True).stderr
        loops = _loops(cubin) if mode1 else None
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    spill = int(re.search(r"(\d+) bytes spill stores", info).group(1))
    threads = 32 * opts.get("num_warps", 4)
    by_regs = REGS_PER_SM // (-(-regs * 32 // 256) * 256 * threads // 32)
    smem = k.metadata.shared
    resident = min(by_regs, SMEM_PER_SM // smem if smem else by_regs)
    keep = {n: consts[(i,)] for i, n in enumerate(sig) if (i,) in consts
            and n in ("BLOCK_N", "BLOCK_K", "DOT", "GLU", "SPLIT", "B_MODE", "NORM_DEFER", "STAGES")}
    return (f"{fname} {keep} warps {threads // 32}: {regs} registers, {spill} bytes spilled, "
            f"{smem // 1024} KB shared: {resident} programs a multiprocessor"
            + (f"; loops of {loops} instructions" if loops is not None else ""))


def main() -> None:
    mode1 = "--mode1" in sys.argv[1:]
    specs = [a for a in sys.argv[1:] if a != "--mode1"] or ["4096x14336x0x1", "4096x28672x1x1", "4096x4096x0x0"]
    if os.environ.get("TRITON_INTERPRET") == "1":  # the child: record (the kernels take the interpreter's path)
        path, specs = specs[0], specs[1:]
        out = [(spec, record(*(int(v) for v in spec.split("x")))) for spec in specs]
        with open(path, "wb") as f:
            pickle.dump(out, f)
        return
    with tempfile.TemporaryDirectory() as tmp:  # the parent: record in a child, compile here
        path = os.path.join(tmp, "launches.pkl")
        subprocess.run([sys.executable, __file__, path, *specs], check=True,
                       env={**os.environ, "TRITON_INTERPRET": "1"})
        with open(path, "rb") as f:
            recorded = pickle.load(f)
    for spec, items in recorded:
        K, N, sw, f8, *nm = (int(v) for v in spec.split("x"))
        for item in items:
            what = f"1x{K}x{N}{' swiglu' if sw else ''}{' fp8' if f8 else ''}{' normed' if nm and nm[0] else ''}"
            print(f"{what}: {compile_one(item, mode1)}", flush=True)


if __name__ == "__main__":
    main()
