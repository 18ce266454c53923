"""What the linear-algebra tests share: dtypes, unit roundoffs, tolerances, random inputs."""
import torch

from tests.tolerances import REL_TOL

DTYPES = [torch.float32, torch.float64, torch.complex64]
#: Unit roundoff of each dtype.
EPS = {torch.float32: 2.0 ** -24, torch.float64: 2.0 ** -53, torch.complex64: 2.0 ** -24,
       torch.complex128: 2.0 ** -53}
TOL = {**REL_TOL, torch.complex64: REL_TOL[torch.float32], torch.complex128: REL_TOL[torch.float64]}


def _hi(dtype):
    """The float64-based dtype references are computed in."""
    return torch.complex128 if dtype.is_complex else torch.float64


def rand(*shape, dtype=torch.float32, device="cpu"):
    """Normal data drawn in float64 on the CPU (complex: independent real and imaginary parts)."""
    x = torch.randn(shape, dtype=torch.float64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(shape, dtype=torch.float64))
    return x.to(dtype=dtype, device=device)
