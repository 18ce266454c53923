"""The one table of tolerances, by output dtype, and the comparison every test uses."""
import math

import torch

#: Relative error ||out - ref|| / ||ref|| allowed for a result of this dtype.
REL_TOL = {
    torch.float64: 1e-12,
    torch.float32: 2e-6,
    torch.float16: 1e-3,
    torch.bfloat16: 8e-3,
    torch.complex64: 2e-6,
    torch.complex128: 1e-12,
}


def _f64(out: torch.Tensor, ref: torch.Tensor):
    """Both in float64 on the CPU; complex ones (either) as (re, im) pairs, a last dimension of 2
    (a plain cast to float64 would drop the imaginary parts)."""
    if out.is_complex() or ref.is_complex():
        return tuple(torch.view_as_real(t.cpu().to(torch.complex128)) for t in (out, ref))
    return out.double().cpu(), ref.double().cpu()


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| over the finite reference entries, in float64 (complex: both parts)."""
    out, ref = _f64(out, ref)
    denom = ref.norm().item()
    return (out - ref).norm().item() / (denom if denom > 0 else 1.0)


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype = None, tol: float = None):
    """Shapes equal, NaN exactly where the reference has NaN, infinities equal, and the
    relative error of the finite part within the table's tolerance for ``dtype``."""
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    dtype = dtype or out.dtype
    tol = REL_TOL[dtype] if tol is None else tol
    out, ref = _f64(out, ref)
    ref_nan, out_nan = ref.isnan(), out.isnan()
    assert torch.equal(ref_nan, out_nan), (
        f"NaN mismatch: {int(out_nan.sum())} NaN in output, {int(ref_nan.sum())} in reference")
    inf = ref.isinf()
    assert torch.equal(out[inf], ref[inf]), "infinite entries differ from the reference"
    finite = ~(ref_nan | inf)
    assert torch.isfinite(out[finite]).all(), "output is non-finite where the reference is finite"
    err = rel_error(out[finite], ref[finite])
    assert err <= tol and not math.isnan(err), f"relative error {err:.3e} > tolerance {tol:.1e} ({dtype})"
