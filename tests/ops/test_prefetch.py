"""``l2_prefetch``: a hint that never changes a result. Where it runs (NVIDIA capability 9.0+)
the kernel must compile with its bulk prefetch ahead of the dependent-launch wait, and leave
the tensor as it was; elsewhere it does nothing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fastpath.ops import prefetch as P

ROOT = Path(__file__).resolve().parents[2]


def test_rejected_tensors_are_left_alone(device):
    t = torch.arange(1000, dtype=torch.float32, device=device)
    before = t.clone()
    assert P.l2_prefetch(t, None, t[:0], t[::2]) is None
    assert torch.equal(t, before)
    assert not P.prefetch_ok(t[::2])  # not contiguous
    assert not P.prefetch_ok(torch.ones(8))  # CPU


def _cuda_backend() -> bool:
    try:
        from triton.backends.nvidia import compiler  # noqa: F401
    except Exception:  # noqa: BLE001 - a Triton build without the CUDA backend
        return False
    return True


_COMPILE = """
import sys, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fastpath.ops import prefetch as P
src = ASTSource(P._l2_prefetch_kernel, {"base": "*u8", "nbytes": "i64", "CHUNK": "constexpr", "PER": "constexpr",
                                        "PDL": "constexpr"},
                constexprs={(2,): P.CHUNK, (3,): P.PER_PROGRAM, (4,): int(sys.argv[1])},
                attrs={(0,): [["tt.divisibility", 16]]})
print(triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1}).asm["ptx"])
"""


@pytest.mark.skipif(not _cuda_backend(), reason="this Triton has no CUDA backend to compile with")
@pytest.mark.parametrize("pdl", [0, 1])
def test_kernel_compiles_for_sm90(pdl):
    """Compiled for the H200 on any machine (outside the interpreter, in a subprocess): every
    thread issues one bulk prefetch under a predicate (nothing past the end), and with PDL
    lets the next kernel launch, then waits for the one before."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", _COMPILE, str(pdl)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    ptx = run.stdout
    at = ptx.index("@p cp.async.bulk.prefetch.L2.global")
    if pdl:
        assert at < ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait")
    else:
        assert "griddepcontrol" not in ptx


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                    reason="the bulk prefetch needs an NVIDIA GPU of capability 9.0+")
@pytest.mark.parametrize("numel", [1, 8191, 3 * P.CHUNK * P.PER_PROGRAM // 2 + 7])
def test_prefetch_then_read(numel):
    t = torch.randn(numel, device="cuda").bfloat16()
    want = t.float().sum().item()
    assert P.prefetch_ok(t)
    P.l2_prefetch(t)
    assert t.float().sum().item() == want
    torch.cuda.synchronize()
