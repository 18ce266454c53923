"""``FP8Linear``: a linear layer with a float8_e4m3fn weight (one float32 scale per output
row) and activations in bf16 / fp16 / fp32; ``quantize_`` swaps a model's ``nn.Linear``
layers for it, on the module it is given.

Weight-only FP8 halves the bytes a bf16 decode step reads for its weights; the matrix-vector
kernel of :func:`fastpath.ops.linear.linear` dequantises in registers.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import nn

from .._core.errors import require_fp8
from ..ops.fp8 import quantize_fp8
from ..ops.linear import linear

def quantize_rowwise(w: torch.Tensor, dtype: Optional[torch.dtype] = None):
    """Per-output-row FP8 quantisation of a 2-D weight: ``(q, scale)`` with ``q`` float8_e4m3fn
    ``(N, K)`` and ``scale`` float32 ``(N, 1)``, ``w ~= q.float() * scale``.

    :func:`fastpath.ops.fp8.quantize_fp8` with the ``"rowwise"`` recipe (a Triton kernel on
    GPUs): ``scale = amax(|row|) / 448``, a row of zeros gets scale 1, values saturate at
    +-448."""
    require_fp8()
    dtype = dtype or torch.float8_e4m3fn
    if dtype != torch.float8_e4m3fn:
        raise NotImplementedError(f"dtype: only torch.float8_e4m3fn weights are supported, got {dtype}")
    if w.dim() != 2:
        raise ValueError(f"w: expected a 2-D (out_features, in_features) weight, got shape {tuple(w.shape)}")
    q, scale = quantize_fp8(w.detach(), "rowwise", dtype=dtype)
    return q, scale.reshape(-1, 1)


class FP8Linear(nn.Module):
    """``y = x @ (weight.float() * weight_scale).T + bias`` with a float8_e4m3fn weight.

    Parameters
    ----------
    in_features, out_features : K and N.
    bias : whether the layer has a bias (stored in ``dtype``).
    device : where the tensors live.
    dtype : the activation dtype: the bias is stored in it and inputs must have it when
        there is a bias (bf16 by default).

    Buffers (not parameters: the layer is for inference; they are in ``state_dict``):
    ``weight`` float8_e4m3fn ``(N, K)`` (initialised to zeros: fill it with
    :meth:`from_linear` or ``load_state_dict``), ``weight_scale`` float32 ``(N, 1)``
    (ones), and ``bias`` a Parameter ``(N,)`` in ``dtype`` or None.

    ``module.to(device)`` moves everything; ``module.to(dtype)`` / ``.half()`` cast the bias
    only: the weight stays float8 and its scale float32.

    Example
    -------
    >>> lin = torch.nn.Linear(4096, 4096, dtype=torch.bfloat16, device="cuda")
    >>> q = FP8Linear.from_linear(lin)
    >>> q(torch.randn(1, 4096, dtype=torch.bfloat16, device="cuda")).shape
    torch.Size([1, 4096])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        require_fp8()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.register_buffer("weight", torch.zeros(self.out_features, self.in_features, device=device,
                                                   dtype=torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(self.out_features, 1, device=device,
                                                        dtype=torch.float32))
        if bias:
            self.bias = nn.Parameter(torch.zeros(self.out_features, device=device, dtype=dtype),
                                     requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_linear(cls, linear_: nn.Linear, dtype: torch.dtype = torch.float8_e4m3fn) -> "FP8Linear":
        """A new FP8Linear holding ``linear_``'s weight quantised per output row
        (``scale = row amax / 448``, saturating, a zero row gets scale 1: see
        :func:`quantize_rowwise`) and a copy of its bias; same device, bias dtype kept."""
        w = linear_.weight
        bias_dtype = linear_.bias.dtype if linear_.bias is not None else w.dtype
        if not bias_dtype.is_floating_point or bias_dtype == torch.float64:
            bias_dtype = torch.float32
        out = cls(linear_.in_features, linear_.out_features, bias=linear_.bias is not None,
                  device="meta", dtype=bias_dtype)
        q, scale = quantize_rowwise(w, dtype)
        out.weight, out.weight_scale = q, scale
        if linear_.bias is not None:
            out.bias = nn.Parameter(linear_.bias.detach().to(bias_dtype).clone(), requires_grad=False)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, weight_scale=self.weight_scale)

    def _apply(self, fn, recurse=True):
        # Module.to(dtype) casts every floating-point tensor, float8 included: keep the
        # weight float8 and the scale float32, follow the device only.
        keep = {k: self._buffers[k] for k in ("weight", "weight_scale")}
        super()._apply(fn, recurse)
        for k, old in keep.items():
            new = self._buffers[k]
            if new is not None and old is not None and new.dtype != old.dtype:
                self._buffers[k] = old.to(device=new.device)
        return self

    def extra_repr(self) -> str:
        bias = None if self.bias is None else str(self.bias.dtype).replace("torch.", "")
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"weight=float8_e4m3fn, scale=per-row, bias={bias}")


def _default_filter(module: nn.Module, name: str) -> bool:
    """Every plain ``nn.Linear`` except one named ``lm_head``: the output projection is the
    layer most sensitive to quantisation and is often tied to the input embedding. Subclasses
    of nn.Linear are skipped (e.g. ``nn.MultiheadAttention``'s ``out_proj``, whose weight
    the parent reads directly)."""
    return type(module) is nn.Linear and name.rsplit(".", 1)[-1] != "lm_head"


def quantize_(model: nn.Module, filter_fn: Optional[Callable[[nn.Module, str], bool]] = None, *,
              dtype: torch.dtype = torch.float8_e4m3fn) -> nn.Module:
    """Swap, in place on ``model``, each ``nn.Linear`` accepted by ``filter_fn`` for
    :meth:`FP8Linear.from_linear` (weight-only FP8, per-row scales).

    Parameters
    ----------
    model : the module to modify (only it and its children are touched; nothing global).
    filter_fn : ``filter_fn(module, fully_qualified_name) -> bool`` called for every
        ``nn.Linear`` (subclasses included); default: plain ``nn.Linear`` layers except those
        whose last name component is ``lm_head``.
    dtype : the weight dtype; only ``torch.float8_e4m3fn``.

    Returns
    -------
    ``model`` itself. If ``model`` is itself an accepted ``nn.Linear`` (name ``""``), a new
    FP8Linear is returned instead (a module cannot replace itself): use the return value.

    Raises
    ------
    RuntimeError if torch has no float8 dtype; NotImplementedError for another ``dtype``.
    """
    require_fp8()
    if dtype != torch.float8_e4m3fn:
        raise NotImplementedError(f"dtype: only torch.float8_e4m3fn weights are supported, got {dtype}")
    accept = filter_fn or _default_filter
    if isinstance(model, nn.Linear):
        return FP8Linear.from_linear(model, dtype) if accept(model, "") else model
    swaps = []
    for name, module in model.named_modules():
        for child_name, child in module.named_children():
            fqn = f"{name}.{child_name}" if name else child_name
            if isinstance(child, nn.Linear) and accept(child, fqn):
                swaps.append((module, child_name, child))
    for parent, child_name, child in swaps:
        setattr(parent, child_name, FP8Linear.from_linear(child, dtype))
    return model
