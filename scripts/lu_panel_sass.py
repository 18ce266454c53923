"""Offline sm_90 SASS of the blocked LU kernel as complex64 lu_factor of 256x256 matrices
launches it (triton 3.6, no GPU): registers, spills, and per loop (backward branch) the count
of barriers, shuffles, shared/global memory and float instructions, to see what one panel
column costs before spending device time.

    PYTHONPATH=/path/to/triton-3.6:src python scripts/lu_panel_sass.py [HOST_UPDATE] [ROTATE] [SMEM]

(HOST_UPDATE: 0 inline, 1 matmul, 2 kernel, 3 kernel + fused look-ahead)

(ROTATE: lu.PANEL_ROTATE, 1: the complex64 panel columns rotated, 2: and the search a step ahead,
3: and the search and pivot row in one barrier (redux.sync);
SMEM: lu.PANEL_SMEM, 0 / 1)
(ptxas / cuobjdump from that Triton's nvidia backend; writes /tmp/lu/k.{ptx,cubin,sass})
"""
import collections
import inspect
import os
import re
import subprocess
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fastpath.ops.linalg import lu

if len(sys.argv) > 2:
    lu.PANEL_ROTATE = int(sys.argv[2])
if len(sys.argv) > 3:
    lu.PANEL_SMEM = bool(int(sys.argv[3]))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_sm90 import sass_loops  # noqa: E402

k = lu._lu_kernel
names = list(inspect.signature(k.fn).parameters)
# lu._launch's blocked plan for complex64 256x256: panels of 16 columns, 8 warps
const = dict(BLOCK_B=1, M=256, W=int(os.environ.get("PANEL_W", 16)), CW=32, BM=int(os.environ.get("PANEL_BM", 128)),
             BLOCKED=True, PIVOT=True, DET=0, STORE_LU=True,
             CPLX=True, PREC="ieee", ROWS_PANEL=1 + lu.PANEL_PACK + lu.PANEL_PACK * int(lu.PANEL_ROTATE),
             HOST_UPDATE=(int(sys.argv[1]) if len(sys.argv) > 1
                          else {"inline": 0, "matmul": 1, "kernel": 3}[lu._step_form(True)]),
             NEUMANN=lu.BLOCKED_STEP_NEUMANN, PANEL_SMEM=bool(lu.PANEL_ROTATE and lu.PANEL_SMEM), WARPS=8,
             TRACK=lu.TRACK_UNROLLED, DEFER_LEFT=lu.DEFER_LEFT,
             RCW=int(os.environ.get("PANEL_RCW", lu.PANEL_RIGHT_CW or lu.BLOCKED_CW[1])), UNIT=lu.UNIT_ROWS,
             PREFETCH=bool(int(os.environ.get("PANEL_PREFETCH", int(lu.PANEL_PREFETCH)))))
sig, cx = {}, {}
ptr_types = {"piv_ptr": "*i32", "info_ptr": "*i32", "ws_ptr": "*i64"}
for i, nm in enumerate(names):
    if nm in const:
        sig[nm] = "constexpr"
        cx[(i,)] = const[nm]
    else:  # pointers (real views of complex64: float32), sizes and strides (int32)
        sig[nm] = ptr_types.get(nm, "*fp32") if nm.endswith("_ptr") else "i32"
aligned = ("m", "n", "sab", "sar", "slb", "slr")  # 256 and its multiples: divisible by 16
attrs = {(i,): [["tt.divisibility", 16]] for i, nm in enumerate(names) if nm.endswith("_ptr") or nm in aligned}
src = ASTSource(k, sig, constexprs=cx, attrs=attrs)
c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=8))
os.makedirs("/tmp/lu", exist_ok=True)
open("/tmp/lu/k.ptx", "w").write(c.asm["ptx"])
b = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin") + "/"
out = subprocess.run([b + "ptxas", "-arch=sm_90a", "-v", "/tmp/lu/k.ptx", "-o", "/tmp/lu/k.cubin"],
                     capture_output=True, text=True).stderr
print(re.findall(r"Used \d+ registers.*", out), re.findall(r"\d+ bytes spill stores", out))
sass = subprocess.run([b + "cuobjdump", "-sass", "/tmp/lu/k.cubin"], capture_output=True, text=True).stdout
open("/tmp/lu/k.sass", "w").write(sass)
print(len(re.findall(r"^\s*/\*[0-9a-f]{4,}\*/\s+.*?;", sass, re.M)), "instructions")
for first, last, body in sass_loops(sass):  # each loop: its body from the branch target to the branch
    ops = collections.Counter((x.split()[1] if x.startswith("@") else x.split()[0]).split(".")[0] for x in body)
    keep = ("BAR", "SHFL", "REDUX", "LDS", "STS", "LDG", "STG", "FFMA", "FADD", "FMUL", "FSEL", "ISETP")
    print(f"loop {first:#x}-{last:#x}: {len(body)} instructions", {k: ops[k] for k in keep if ops[k]})
