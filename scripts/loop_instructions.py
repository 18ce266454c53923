"""Offline instruction count of the decode kernels' loops for the H200 (sm_90), without a GPU:
each variant is compiled by Triton with the specialisations a decode launch gets (unit
strides, 16-byte aligned pointers and sizes), and every loop of its PTX is counted by opcode.
A loop that grows from its usual size is a warning before any device time is spent
(docs/perf-notes.md, session of 2026-11-30, seventh: a fused norm took the matrix-vector
loop from ~120 to ~5500 instructions a K tile).

    python scripts/loop_instructions.py            # any Triton with the CUDA backend
    PYTHONPATH=/path/to/triton-3.6 python scripts/loop_instructions.py   # the H200's version
"""
import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fastpath.ops import matvec as MV
from fastpath.ops import moe_kernels as MK

_MV = dict(A_MODE=0, B_MODE=0, A_E5M2=False, B_E5M2=False, SCALE_A=False, SCALE_B=False, BLOCKWISE=False,
           HAS_BIAS=False, SPLIT=True, DOT=True, DT=tl.bfloat16, S16=False, GLU=False, BLOCK_M=16, PDL=0,
           sak=1, sbk=1, son=1, ssa_m=0, ssa_k=0, ssb_k=0, ssb_n=1)
_ROWS = dict(TOPK=8, MODE=0, E5M2=False, HAS_SCALE=False, HAS_BIAS=False, RNE=False, BLOCK_K8=8, STAGES=3, PDL=0)
_GU_ROWS = dict(_ROWS, ACT=0, BLOCK_I=8, BLOCK_H=512, sxh=1, swk=1)
_DN_ROWS = dict(_ROWS, BLOCK_N=8, BLOCK_K=1024, swk=1, soh=1)
#: name -> (kernel, {pointer argument: type}, constexprs)
VARIANTS = {
    "matvec, bf16 weights (32, 256)": (MV._mv_kernel, {"b_ptr": "*bf16"}, {**_MV, "BLOCK_N": 32, "BLOCK_K": 256}),
    "matvec, fp8 via float16 (64, 256)": (MV._mv_kernel, {"b_ptr": "*fp8e4nv"},
                                          {**_MV, "B_MODE": 1, "S16": True, "DT": tl.float16, "SCALE_B": True,
                                           "BLOCK_N": 64, "BLOCK_K": 256}),
    "matvec, fp8 via bfloat16 (64, 256)": (MV._mv_kernel, {"b_ptr": "*fp8e4nv"},
                                           {**_MV, "B_MODE": 1, "SCALE_B": True, "BLOCK_N": 64, "BLOCK_K": 256}),
    "matvec, fp8 one row, FMA (8, 1024)": (MV._mv_kernel, {"b_ptr": "*fp8e4nv"},
                                           {**_MV, "B_MODE": 1, "DOT": False, "DT": tl.float32, "SCALE_B": True,
                                            "BLOCK_M": 1, "BLOCK_N": 8, "BLOCK_K": 1024}),
    "matvec, bf16 one row, FMA (8, 1024)": (MV._mv_kernel, {"b_ptr": "*bf16"},
                                            {**_MV, "DOT": False, "DT": tl.float32, "BLOCK_M": 1, "BLOCK_N": 8,
                                             "BLOCK_K": 1024}),
    "moe rows gate/up, bf16": (MK._gate_up_rows_kernel, {}, _GU_ROWS),
    "moe rows gate/up, fp8": (MK._gate_up_rows_kernel, {"w_ptr": "*fp8e4nv", "s_ptr": "*fp32"},
                              {**_GU_ROWS, "MODE": 1, "HAS_SCALE": True}),
    "moe rows down, bf16": (MK._down_rows_kernel, {}, _DN_ROWS),
    "moe rows down, fp8": (MK._down_rows_kernel, {"w_ptr": "*fp8e4nv", "s_ptr": "*fp32"},
                           {**_DN_ROWS, "MODE": 1, "HAS_SCALE": True}),
}


def compile_ptx(fn, ptr_types: dict, consts_by_name: dict) -> str:
    sig, consts, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        n = p.name
        if n.endswith("_ptr"):
            sig[n] = ptr_types.get(n, "*i64" if n == "ids_ptr" else "*fp32" if n in ("tw_ptr", "part_ptr", "ws_ptr")
                                   else "*i32" if n == "cnt_ptr" else "*bf16")
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif n in consts_by_name:
            sig[n], consts[(i,)] = "constexpr", consts_by_name[n]
        elif p.has_default:  # optional arguments a plain launch leaves out
            sig[n], consts[(i,)] = "constexpr", p.default
        elif n in ("alpha", "limit", "eps"):
            sig[n] = "fp32"
        else:
            sig[n] = "i32"
            if n not in ("M", "T", "n_split", "E", "row_mul"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 4})
    return k.asm["ptx"]


def loops(ptx: str) -> list:
    """Instruction lists of the loops (a label that a later branch jumps back to), in order."""
    lines = ptx.split("\n")
    labels = {ln.split(":")[0]: i for i, ln in enumerate(lines) if re.match(r"^\$L__BB\d+_\d+:", ln)}
    found = []
    for i, ln in enumerate(lines):
        m = re.search(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ln)
        if m and labels.get(m.group(1), i) < i:
            found.append([x.strip() for x in lines[labels[m.group(1)]:i]
                          if x.strip() and not x.strip().startswith(("$", "//", "{", "}", "."))])
    return found


def main():
    print(f"triton {triton.__version__}, sm_90, 4 warps")
    for name, (fn, ptrs, consts) in VARIANTS.items():
        for n, body in enumerate(loops(compile_ptx(fn, ptrs, consts))):
            if len(body) < 40:  # small bookkeeping loops
                continue
            ops: dict = {}
            for x in body:
                op = x.split()[1] if x.startswith("@") else x.split()[0]
                op = ".".join(op.split(".")[:2])
                ops[op] = ops.get(op, 0) + 1
            top = ", ".join(f"{o} {c}" for o, c in sorted(ops.items(), key=lambda kv: -kv[1])[:8])
            print(f"{name:38s} loop {n}: {len(body):5d} instructions a trip  [{top}]")


if __name__ == "__main__":
    main()
