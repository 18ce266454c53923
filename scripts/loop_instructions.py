"""Offline instruction count of the matrix-vector kernel's main loop, for the H200 (sm_90),
without a GPU: each variant is compiled by Triton with the specialisations a decode launch
gets (unit strides, 16-byte aligned pointers and sizes), and the largest loop of its PTX is
counted by opcode. A loop that grows from ~120 instructions a K tile is a warning before any
device time is spent (docs/perf-notes.md, session of 2026-11-30, seventh).

    python scripts/loop_instructions.py            # any Triton with the CUDA backend
    PYTHONPATH=/path/to/triton-3.6 python scripts/loop_instructions.py   # the H200's version
"""
import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fastpath.ops import matvec as MV

#: name -> (weight pointer type, constexpr overrides, BLOCK_N, BLOCK_K): the default plans.
VARIANTS = {
    "bf16 weights": ("*bf16", {}, 32, 256),
    "fp8 weights via float16 (FP8_VIA_FP16)": ("*fp8e4nv", dict(B_MODE=1, S16=True, DT=tl.float16, SCALE_B=True), 64, 256),
    "fp8 weights via bfloat16": ("*fp8e4nv", dict(B_MODE=1, DT=tl.bfloat16, SCALE_B=True), 64, 256),
}
PTRS = {"a_ptr": "*bf16", "sa_ptr": "*fp32", "sb_ptr": "*fp32", "bias_ptr": "*bf16", "out_ptr": "*bf16",
        "ws_ptr": "*fp32", "cnt_ptr": "*i32"}


def compile_ptx(b_type: str, overrides: dict, block_n: int, block_k: int) -> str:
    fn = MV._mv_kernel
    cv = dict(A_MODE=0, B_MODE=0, A_E5M2=False, B_E5M2=False, SCALE_A=False, SCALE_B=False, BLOCKWISE=False,
              HAS_BIAS=False, SPLIT=True, DOT=True, DT=tl.bfloat16, S16=False, GLU=False, BLOCK_M=16,
              BLOCK_N=block_n, BLOCK_K=block_k, PDL=0, sak=1, sbk=1, son=1, ssa_m=0, ssa_k=0, ssb_k=0, ssb_n=1)
    cv.update(overrides)
    sig, consts, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        n = p.name
        if n in PTRS or n == "b_ptr":
            sig[n] = b_type if n == "b_ptr" else PTRS[n]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif n in cv:
            sig[n], consts[(i,)] = "constexpr", cv[n]
        elif p.has_default:  # optional arguments a plain launch leaves out
            sig[n], consts[(i,)] = "constexpr", p.default
        else:
            sig[n] = "i32"
            if n not in ("M", "n_split"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 4})
    return k.asm["ptx"]


def largest_loop(ptx: str) -> list:
    """Instructions of the largest loop (a label that a later branch jumps back to)."""
    lines = ptx.split("\n")
    labels = {ln.split(":")[0]: i for i, ln in enumerate(lines) if re.match(r"^\$L__BB\d+_\d+:", ln)}
    best: list = []
    for i, ln in enumerate(lines):
        m = re.search(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [x.strip() for x in lines[labels[m.group(1)]:i]
                    if x.strip() and not x.strip().startswith(("$", "//", "{", "}", "."))]
            best = max(best, body, key=len)
    return best


def main():
    print(f"triton {triton.__version__}, sm_90, 4 warps, 16 padded rows")
    for name, (b_type, over, bn, bk) in VARIANTS.items():
        body = largest_loop(compile_ptx(b_type, over, bn, bk))
        ops: dict = {}
        for x in body:
            op = x.split()[1] if x.startswith("@") else x.split()[0]
            op = ".".join(op.split(".")[:2])
            ops[op] = ops.get(op, 0) + 1
        top = ", ".join(f"{o} {c}" for o, c in sorted(ops.items(), key=lambda kv: -kv[1])[:8])
        print(f"{name:42s} ({bn}, {bk}): {len(body):5d} instructions a K tile  [{top}]")


if __name__ == "__main__":
    main()
