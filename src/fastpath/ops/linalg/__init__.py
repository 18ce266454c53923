"""Linear algebra: ``inv_ex``, ``inv``, ``solve_ex``, ``solve`` with ``torch.linalg``
semantics. ``small``: one Triton kernel for batches of small matrices (n <= 16); larger or
complex problems take ``torch.linalg`` itself."""
from __future__ import annotations

from ..._core.backend import triton_reason
from .small import (InvEx, SolveEx, inv, inv_ex, reference_inv_ex, reference_solve_ex, solve,
                    solve_ex)

__all__ = ["InvEx", "SolveEx", "inv", "inv_ex", "reference_inv_ex", "reference_solve_ex", "solve",
           "solve_ex", "FAMILY"]

FAMILY = {"name": "linalg", "ops": ["inv_ex", "inv", "solve_ex", "solve"], "reason": triton_reason}
