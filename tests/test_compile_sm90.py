"""Kernels the interpreter runs must also compile for a GPU: ``scripts/compile_sm90.py`` records
the launches of linear-algebra and batch_norm calls (through the interpreter's launch path,
without running the kernels) and compiles each variant for sm_90 (H200) with the installed
Triton, on the CPU: the first variant of each kernel to a cubin, the others through the front
end and the GPU layout passes. (The interpreter accepts code the compiler rejects: a helper's
default string argument broke the blocked LU under triton 3.6.) The ``attention`` part records
with the GPU's plans and also checks each variant's shared memory against sm_90's limit (64-row
decode programs with a mask once needed 245816 B, an ``OutOfResources`` at launch); ``linalg-gpu``,
``ops-gpu`` and ``training-gpu`` do the same for the linear-algebra benchmark's issue-sized calls,
the decode path's other ops (linear, scaled_mm, the one-token MoE kernels, softmax, rms_norm) and
the training benchmark's forward + backward calls."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _has_cuda_backend() -> bool:
    try:
        from triton.backends.nvidia import compiler  # noqa: F401
    except Exception:  # noqa: BLE001 - a Triton build without the CUDA backend
        return False
    return True


@pytest.mark.skipif(not _has_cuda_backend(), reason="this Triton has no CUDA backend to compile with")
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU every kernel test runs compiled kernels already")
# (the suite's workers share them)
@pytest.mark.parametrize("part", ["linalg-lu", "linalg-rest", "batch_norm", "attention", "linalg-gpu", "ops-gpu",
                                  "training-gpu"])
def test_kernels_compile_for_sm90(part):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_sm90.py"), part], env=env,
                         capture_output=True, text=True, timeout=1200)
    fails = [ln for ln in run.stdout.splitlines() if ln.startswith("FAIL")]
    assert run.returncode == 0 and not fails, "\n".join(fails) or run.stdout[-2000:] + run.stderr[-2000:]
    assert "kernel variants compile for sm_90" in run.stdout
    # (on the H200 the plans fit as tuned: no variant may need the Launcher's fewer-stages fallback)
    assert "fewer pipeline stages" not in run.stdout, [ln for ln in run.stdout.splitlines() if " stages," in ln]


_NESTED = """
import json, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, sys.argv[1])
from compile_sm90 import loop_report

@triton.jit
def nested(x_ptr, y_ptr, n, m):
    offs = tl.arange(0, 128)
    for i in range(0, n):
        acc = tl.zeros([128], dtype=tl.float32)
        for j in range(0, m):
            acc += tl.load(x_ptr + (i * m + j) * 128 + offs)
        tl.store(y_ptr + i * 128 + offs, acc)

src = ASTSource(nested, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "m": "i32"}, constexprs={}, attrs={})
kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
print(json.dumps(loop_report(kernel.asm["cubin"])))
"""


@pytest.mark.skipif(not _has_cuda_backend(), reason="this Triton has no CUDA backend to compile with")
def test_sass_loops_nesting_and_own_instructions(tmp_path):
    """``COMPILE_LOOPS``' reader (compiled in a process without the interpreter): a kernel with a
    load in an inner loop and a store in the outer one, compiled for sm_90: the inner loop's SASS
    loops at depth 1 with the load and without the store among their own instructions, the outer's
    at depth 0 with the store."""
    import json
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    script = tmp_path / "nested.py"  # (a @jit function needs a file)
    script.write_text(_NESTED)
    run = subprocess.run([sys.executable, str(script), str(ROOT / "scripts")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    usage, *loops = json.loads(run.stdout.splitlines()[-1])
    assert "registers" in usage
    # (ptxas may unroll a loop and add a remainder loop: each is a loop of its own)
    inner = [ops for d, _, ops in loops if d == 1]
    outer = [ops for d, _, ops in loops if d == 0]
    assert inner and outer and len(inner) + len(outer) == len(loops), loops
    assert all(ops.get("LDG", 0) >= 1 and not ops.get("STG", 0) for ops in inner), loops
    assert any(ops.get("STG", 0) for ops in outer), loops  # (an outer loop may hold a peeled inner iteration)
    assert all(sum(ops.values()) == n for _, n, ops in loops)
