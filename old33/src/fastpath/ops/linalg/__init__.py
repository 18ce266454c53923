"""Linear algebra with ``torch.linalg`` semantics, argument names and named tuples.

* ``small``: ``inv_ex``, ``inv``, ``solve_ex``, ``solve`` (one Gauss-Jordan kernel, n <= 16).
* ``lu``: ``lu_factor_ex``, ``lu_factor``, ``lu_solve``, ``det``, ``slogdet`` (in-register LU for
  n <= 32, a blocked LU per matrix for batches of medium matrices).
* ``triangular``: ``solve_triangular`` (in registers, blocked, or host-blocked for large n).
* ``qr``: ``qr`` (Householder in registers: batches of small and tall-skinny matrices).
* ``svd``: ``svd``, ``svdvals``, ``pinv`` (one-sided Jacobi, m, n <= 32).

float32, float64, and (inv, solves, LU, QR) complex64/complex128. Shapes, dtypes or devices a
kernel does not serve take ``torch.linalg`` itself; each docstring says where.
"""
from __future__ import annotations

from ..._core.backend import triton_reason
from .lu import (LUFactor, LUFactorEx, SlogDet, det, lu_factor, lu_factor_ex, lu_solve, reference_det,
                 reference_lu_factor_ex, reference_lu_solve, reference_slogdet, slogdet)
from .qr import QR, qr, reference_qr
from .small import (InvEx, SolveEx, inv, inv_ex, reference_inv_ex, reference_solve_ex, solve,
                    solve_ex)
from .svd import SVD, pinv, reference_pinv, reference_svd, reference_svdvals, svd, svdvals
from .triangular import reference_solve_triangular, solve_triangular

__all__ = ["InvEx", "SolveEx", "inv", "inv_ex", "reference_inv_ex", "reference_solve_ex", "solve",
           "solve_ex", "LUFactor", "LUFactorEx", "SlogDet", "lu_factor_ex", "lu_factor", "lu_solve", "det",
           "slogdet", "reference_lu_factor_ex", "reference_lu_solve", "reference_det", "reference_slogdet",
           "solve_triangular", "reference_solve_triangular", "QR", "qr", "reference_qr", "SVD", "svd",
           "svdvals", "pinv", "reference_svd", "reference_svdvals", "reference_pinv", "FAMILY"]

FAMILY = {"name": "linalg",
          "ops": ["inv_ex", "inv", "solve_ex", "solve", "lu_factor_ex", "lu_factor", "lu_solve", "det",
                  "slogdet", "solve_triangular", "qr", "svd", "svdvals", "pinv"],
          "reason": triton_reason}
