"""Kernels the interpreter runs must also compile for a GPU: ``scripts/compile_sm90.py`` records
the launches of linear-algebra and batch_norm calls (through the interpreter's launch path,
without running the kernels) and compiles each variant for sm_90 (H200) with the installed
Triton, on the CPU: the first variant of each kernel to a cubin, the others through the front
end and the GPU layout passes. (The interpreter accepts code the compiler rejects: a helper's
default string argument broke the blocked LU under triton 3.6.) The ``attention`` part records
with the GPU's plans and also checks each variant's shared memory against sm_90's limit (64-row
decode programs with a mask once needed 245816 B, an ``OutOfResources`` at launch); ``linalg-gpu``
and ``ops-gpu`` do the same for the linear-algebra benchmark's issue-sized calls and the decode
path's other ops (linear, scaled_mm, the one-token MoE kernels, softmax, rms_norm)."""
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
@pytest.mark.parametrize("part", ["linalg-lu", "linalg-rest", "batch_norm", "attention", "linalg-gpu", "ops-gpu"])
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
