"""recurrent suite: the kernels of the hybrid models' non-attention layers, Qwen3.6-35B-A3B
shaped (Gated DeltaNet: 16 query/key heads, 32 value heads, head dims 128; hidden 2048).

* ``gdn step``: one decode token, state (B, 32, 128, 128) float32 updated in place, against
  the same step in eager torch ops (transformers' recurrence for one token + the state copy).
  Bytes: the state read and written, plus q, k, v, g, beta and the output.
* ``gdn chunk``: prefill, against transformers' ``torch_chunk_gated_delta_rule`` (its PyTorch
  chunked form; our token-by-token reference where transformers is missing). Bytes: the
  inputs, the output and the final state.
* ``rms_norm ...``: the decoder norms (zero-centred, with the residual add), the gated norm of
  the DeltaNet output over (tokens x 32 heads, 128) and a plain norm, against the same
  transformers-style torch ops (``reference_rms_norm``).

Shapes: (B, T, HK, HV, Dk, Dv) for the delta rule, (rows, N) for the norms.
"""
from __future__ import annotations

from .harness import Case, close_check

QWEN36 = (16, 32, 128, 128)  # HK, HV, Dk, Dv


# ---------------------------------------------------------------------------- gated delta

def _gdn_inputs(shape, dtype, device, seed, step=False):
    import torch
    import torch.nn.functional as F
    B, T, HK, HV, Dk, Dv = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    q = torch.randn(B, T, HK, Dk, generator=g, device=device).to(dt)
    k = torch.randn(B, T, HK, Dk, generator=g, device=device).to(dt)
    v = torch.randn(B, T, HV, Dv, generator=g, device=device).to(dt)
    lg = F.logsigmoid(2 * torch.randn(B, T, HV, generator=g, device=device) + 2)  # float32, as the models
    beta = torch.sigmoid(torch.randn(B, T, HV, generator=g, device=device)).to(dt)
    state = 0.1 * torch.randn(B, HV, Dk, Dv, generator=g, device=device)
    if step:  # one state for ours, one for torch: both are updated in place
        return q[:, 0], k[:, 0], v[:, 0], lg[:, 0], beta[:, 0], state, state.clone()
    return q, k, v, lg, beta, state


def _gdn_bytes(shape, itemsize, step=False):
    B, T, HK, HV, Dk, Dv = shape
    state = B * HV * Dk * Dv * 4 * (2 if step else 1)
    return state + B * T * (2 * HK * Dk * itemsize + 2 * HV * Dv * itemsize + HV * (4 + itemsize))


def _torch_step(q, k, v, g, beta, _, state):
    """Eager torch: the recurrence for one token (as transformers), then the state copied back."""
    from ..ops.gated_delta import reference_gated_delta_rule
    o, new = reference_gated_delta_rule(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None],
                                        initial_state=state)
    state.copy_(new)
    return o[:, 0]


def _torch_chunk(q, k, v, g, beta, state):
    try:
        from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import torch_chunk_gated_delta_rule
    except ImportError:
        torch_chunk_gated_delta_rule = None
    if torch_chunk_gated_delta_rule is None:
        from ..ops.gated_delta import reference_gated_delta_rule
        return reference_gated_delta_rule(q, k, v, g, beta, initial_state=state)[0]
    rep = v.shape[2] // q.shape[2]  # value heads per key head: transformers repeats q/k first
    if rep > 1:
        q, k = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
    return torch_chunk_gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True,
                                        use_qk_l2norm_in_kernel=True)[0]


def _gdn_cases() -> list:
    import functools

    from ..ops.gated_delta import chunk_gated_delta_rule, gated_delta_rule_step
    out = []
    for B, quick in ((1, True), (8, False), (64, False)):
        shape = (B, 1) + QWEN36
        out.append(Case(
            suite="recurrent", name="gdn step", shape=shape, dtype="bfloat16",
            ours=lambda q, k, v, g, b, s, _: gated_delta_rule_step(q, k, v, g, b, s),
            native=_torch_step, check=close_check,
            nbytes=functools.partial(_gdn_bytes, step=True), cpu_shape=(2, 1, 2, 4, 32, 24),
            make=functools.partial(_gdn_inputs, step=True), graphs=True, quick=quick))
    for B, T, quick in ((1, 512, True), (1, 4096, False), (4, 1024, False)):
        out.append(Case(
            suite="recurrent", name="gdn chunk", shape=(B, T) + QWEN36, dtype="bfloat16",
            ours=lambda q, k, v, g, b, s: chunk_gated_delta_rule(q, k, v, g, b, initial_state=s)[0],
            native=_torch_chunk, check=close_check, nbytes=_gdn_bytes, cpu_shape=(1, 40, 1, 2, 32, 24),
            make=_gdn_inputs, quick=quick))
    return out


# ---------------------------------------------------------------------------- norms

def _norm_inputs(shape, dtype, device, seed, kind="residual"):
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    rows, N = shape
    x = torch.randn(rows, N, generator=g, device=device).to(dt)
    w = (0.1 * torch.randn(N, generator=g, device=device)).to(dt)
    other = torch.randn(rows, N, generator=g, device=device).to(dt)
    return (x, w) if kind == "plain" else (x, w, other)


def _norm_bytes(shape, itemsize, streams):
    rows, N = shape
    return rows * N * itemsize * streams + N * itemsize


def _norm_cases() -> list:
    import functools

    from ..ops.norm import reference_rms_norm, rms_norm

    def ours_res(x, w, r):
        return rms_norm(x, w, residual=r, zero_centered=True)[0]

    def torch_res(x, w, r):
        return reference_rms_norm(x, w, residual=r, zero_centered=True)[0]

    out = []
    for rows, quick in ((1, True), (512, False), (8192, False)):
        out.append(Case(suite="recurrent", name="rms_norm add zc", shape=(rows, 2048), dtype="bfloat16",
                        ours=ours_res, native=torch_res, check=close_check,
                        nbytes=functools.partial(_norm_bytes, streams=4), cpu_shape=(3, 100),
                        make=_norm_inputs, graphs=rows == 1, quick=quick))
    for rows, quick in ((32, True), (16384, False)):
        out.append(Case(suite="recurrent", name="rms_norm gated", shape=(rows, 128), dtype="bfloat16",
                        ours=lambda x, w, z: rms_norm(x, w, gate=z),
                        native=lambda x, w, z: reference_rms_norm(x, w, gate=z), check=close_check,
                        nbytes=functools.partial(_norm_bytes, streams=3), cpu_shape=(7, 128),
                        make=_norm_inputs, graphs=rows == 32, quick=quick))
    out.append(Case(suite="recurrent", name="rms_norm plain", shape=(4, 8192), dtype="bfloat16",
                    ours=lambda x, w: rms_norm(x, w), native=lambda x, w: reference_rms_norm(x, w),
                    check=close_check, nbytes=functools.partial(_norm_bytes, streams=2), cpu_shape=(2, 300),
                    make=functools.partial(_norm_inputs, kind="plain"), graphs=True))
    return out


def cases() -> list:
    return _gdn_cases() + _norm_cases()
