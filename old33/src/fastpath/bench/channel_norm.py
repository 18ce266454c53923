"""channel_norm suite: fastpath's fused channel RMS norm (+ SiLU) against the stock diffusers
composition ``F.normalize(x.float(), dim=1).to(x.dtype) * scale * gamma + 0.0`` then
``F.silu``, on Wan / Qwen-Image VAE decoder activations.

Bytes moved: the input read once and the output written once (gamma is negligible). The
stock composition writes and re-reads a float32 copy, the normalised tensor and three
16-bit intermediates.
"""
from __future__ import annotations

from .harness import Case, close_check, randn_inputs


def _nbytes(shape, itemsize):
    n = 1
    for d in shape:
        n *= d
    return 2 * n * itemsize


def _make(channels_last: bool):
    def make(shape, dtype, device, seed):
        import torch
        (x,) = randn_inputs(shape, dtype, device, seed)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last_3d if x.dim() == 5 else torch.channels_last)
        g = torch.Generator(device=device).manual_seed(seed + 1)
        gshape = (shape[1],) + (1,) * (len(shape) - 2)
        gamma = 1 + 0.1 * torch.randn(gshape, generator=g, device=device, dtype=torch.float32)
        return x, gamma.to(x.dtype)
    return make


def _case(name, shape, cpu_shape, silu=True, channels_last=False, dtype="bfloat16", **kw) -> Case:
    import torch.nn.functional as F

    from ..ops.channel_norm import channel_rms_norm

    def ours(x, gamma):
        return channel_rms_norm(x, gamma, 0.0, silu=silu)

    def native(x, gamma):  # diffusers' WanRMS_norm (bias=False: + 0.0), then the block's SiLU
        h = x.float() if x.element_size() == 2 else x
        y = F.normalize(h, dim=1).to(x.dtype) * x.shape[1] ** 0.5 * gamma + 0.0
        return F.silu(y) if silu else y

    return Case(suite="channel_norm", name=name, shape=shape, dtype=dtype, ours=ours, native=native,
                check=close_check, nbytes=_nbytes, cpu_shape=cpu_shape, make=_make(channels_last), **kw)


def cases() -> list:
    return [
        _case("wan silu 96ch 480x832", (1, 96, 1, 480, 832), (1, 7, 1, 6, 10), quick=True),
        _case("wan norm 96ch 480x832", (1, 96, 1, 480, 832), (1, 7, 1, 6, 10), silu=False),
        _case("wan silu 384ch 2x120x208", (1, 384, 2, 120, 208), (1, 13, 2, 3, 5), quick=True),
        _case("wan silu 384ch cl3d", (1, 384, 2, 120, 208), (1, 13, 2, 3, 5), channels_last=True),
        _case("wan silu 96ch 480x832", (1, 96, 1, 480, 832), (1, 7, 1, 6, 10), dtype="float32"),
        _case("qwen silu 128ch 1024^2", (1, 128, 1024, 1024), (1, 5, 9, 11)),
        _case("wan silu 384ch 60x104", (1, 384, 1, 60, 104), (1, 13, 1, 3, 5), graphs=True),
    ]
