"""moe suite: Qwen3-30B-A3B-shaped mixture-of-experts (128 experts, top-8, hidden 2048,
expert width 768, bf16).

* ``grouped_mm gate_up``: the gate/up projection of the routed rows (sorted by expert,
  ``offs`` on the GPU): fastpath.grouped_mm against torch._grouped_mm, same inputs.
* ``moe layer``: router matmul + routing + experts + weighted combine: fastpath.route +
  fastpath.fused_experts against the same layer on torch ops and torch._grouped_mm
  (softmax, top-k, sort, grouped gate/up, silu * up, grouped down, index_add).
* ``moe layer fp8``: the one-token layer with fp8 experts (per-row scales) against the
  bf16 fastpath layer (the issue's 1.6x).

Shapes are (tokens, hidden, expert width, experts, top-k). Bytes moved count the expert
weights the tokens touch: exactly top-k experts for one token, else the expectation
E * (1 - (1 - k/E)^T) for uniform routing (random logits).
"""
from __future__ import annotations

from .harness import Case, close_check, sqnr_check

QWEN3_30B = (2048, 768, 128, 8)  # hidden, expert width, experts, top-k


def _experts_touched(T, E, k) -> float:
    return float(k) if T == 1 else E * (1 - (1 - k / E) ** T)


def _weights(H, I, E, device, g, dtype):
    import torch
    gate_up = (torch.randn(E, 2 * I, H, generator=g, device=device) * H ** -0.5).to(dtype)
    down = (torch.randn(E, H, I, generator=g, device=device) * I ** -0.5).to(dtype)
    return gate_up, down


def _gmm(a, b, offs):
    """torch._grouped_mm on CUDA; its reference loop where PyTorch has no kernel (CPU check)."""
    import torch
    if a.device.type == "cuda":
        return torch._grouped_mm(a, b, offs=offs)
    from ..ops.grouped_mm import reference_grouped_mm
    return reference_grouped_mm(a, b, offs=offs)


# ---------------------------------------------------------------------------- grouped_mm

def _gmm_inputs(shape, dtype, device, seed):
    import torch
    T, H, I, E, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(T, H, generator=g, device=device).to(dt)
    ids = torch.rand(T, E, generator=g, device=device).topk(k, -1).indices.reshape(-1)
    order = ids.argsort(stable=True)
    offs = torch.bincount(ids, minlength=E).cumsum(0).to(torch.int32)
    gate_up, _ = _weights(H, I, E, device, g, dt)
    return x[order // k].contiguous(), gate_up.transpose(1, 2), offs


def _gmm_bytes(shape, itemsize):
    T, H, I, E, k = shape
    return _experts_touched(T, E, k) * 2 * I * H * itemsize + T * k * (H + 2 * I) * itemsize


# ---------------------------------------------------------------------------- layer

def _layer_inputs(shape, dtype, device, seed, fp8=False):
    import torch
    T, H, I, E, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(T, H, generator=g, device=device).to(dt)
    router = (torch.randn(E, H, generator=g, device=device) * H ** -0.5).to(dt)
    gate_up, down = _weights(H, I, E, device, g, dt)
    if not fp8:
        return x, router, gate_up, down
    from ..ops.moe import quantize_experts
    return (x, router, gate_up, down) + quantize_experts(gate_up) + quantize_experts(down)


def _ours_layer(x, router, gate_up, down, k, gu_scale=None, d_scale=None):
    import torch.nn.functional as F

    from ..ops.moe import fused_experts, route
    w, ids = route(F.linear(x, router), k, norm_topk_prob=True)
    return fused_experts(x, ids, w, gate_up, down, gate_up_scale=gu_scale, down_scale=d_scale)


def _torch_layer(x, router, gate_up, down, k):
    """The layer on torch ops and torch._grouped_mm, as the transformers "grouped_mm" experts
    do it: no host synchronisation either."""
    import torch
    import torch.nn.functional as F
    E = gate_up.shape[0]
    p = torch.softmax(F.linear(x, router), -1, dtype=torch.float32)
    w, ids = torch.topk(p, k, -1)
    w = w / w.sum(-1, keepdim=True)
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.zeros(E, dtype=torch.int32, device=x.device)  # bincount would sync (its size)
    offs = counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32)).cumsum(0, dtype=torch.int32)
    tok = order // k
    h = _gmm(x[tok], gate_up.transpose(1, 2), offs)
    gate, up = h.chunk(2, -1)
    y = _gmm(F.silu(gate) * up, down.transpose(1, 2), offs)
    y = y * w.reshape(-1)[order, None].to(y.dtype)
    return torch.zeros_like(x).index_add_(0, tok, y)


def _layer_bytes(shape, itemsize, weight_bytes=None):
    T, H, I, E, k = shape
    wb = itemsize if weight_bytes is None else weight_bytes
    return _experts_touched(T, E, k) * 3 * I * H * wb + E * H * itemsize + 2 * T * H * itemsize


def cases() -> list:
    import functools

    from ..ops.grouped_mm import grouped_mm
    H, I, E, k = QWEN3_30B
    cpu = (3, 64, 40, 8, 2)
    out = []
    for T in (1, 8, 64, 4096):
        out.append(Case(
            suite="moe", name="grouped_mm gate_up", shape=(T, H, I, E, k), dtype="bfloat16",
            ours=lambda a, b, offs: grouped_mm(a, b, offs=offs), native=_gmm, check=close_check,
            nbytes=_gmm_bytes, cpu_shape=(T if T < 8 else 8, 64, 40, 8, 2), make=_gmm_inputs,
            target=("us", 13.0) if T == 1 else None, graphs=T <= 64, quick=T == 1))
    for T in (1, 64, 4096):
        out.append(Case(
            suite="moe", name="moe layer", shape=(T, H, I, E, k), dtype="bfloat16",
            ours=functools.partial(_ours_layer, k=k), native=functools.partial(_torch_layer, k=k),
            check=close_check, nbytes=_layer_bytes, cpu_shape=cpu if T < 100 else (70, 64, 40, 8, 2),
            make=_layer_inputs, target=("us", 28.0) if T == 1 else None, graphs=T <= 64, quick=T == 1))
    out.append(Case(
        suite="moe", name="moe layer fp8 vs bf16", shape=(1, H, I, E, k), dtype="bfloat16",
        ours=lambda x, r, gu, d, qgu, sgu, qd, sd: _ours_layer(x, r, qgu, qd, k, sgu, sd),
        native=lambda x, r, gu, d, *_: _ours_layer(x, r, gu, d, k),
        check=sqnr_check("the bf16 layer"), nbytes=functools.partial(_layer_bytes, weight_bytes=1), cpu_shape=cpu,
        make=functools.partial(_layer_inputs, fp8=True), graphs=True))
    return out
