"""pad suite: fastpath.pad against F.pad on video/image VAE shapes.

Wan2.x's causal conv3d pads ``(w, w, h, h, 2*t, 0)`` before every conv: spatial 1 and a
causal temporal 2 on (1, 384, 3, 90, 160)-sized activations, and on the 720x1280 planes
(H*W >= 65536) of the last decoder stages; temporal-only pads take the merged-plane path.
Image VAEs pad spatially (replicate / reflect). Bytes moved: the input read once and the
output written once. The check is bit equality with F.pad, and on a GPU it records the
peak memory each side allocates above the live tensors (the output alone is the floor:
padding needs no temporary).
"""
from __future__ import annotations

from .harness import Case, randn_inputs


def _out_shape(shape, p):
    out = list(shape)
    for k in range(len(p) // 2):
        out[-1 - k] += p[2 * k] + p[2 * k + 1]
    return out


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _peak_bytes(fn, x) -> int:
    """Bytes allocated at the peak of one call of ``fn(x)``, above what was live before."""
    import torch
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn(x)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak


def _check(ours, native):
    def check(inputs, out, ref):
        import torch
        ok = out.shape == ref.shape and out.dtype == ref.dtype and out.stride() == ref.stride()
        ok = ok and torch.equal(out, ref)
        detail = "bit-exact with F.pad" if ok else (
            f"differs from F.pad: {out.dtype} {tuple(out.shape)} {out.stride()} vs "
            f"{ref.dtype} {tuple(ref.shape)} {ref.stride()}")
        if out.is_cuda:
            mib = 2.0**20
            detail += (f"; peak +{_peak_bytes(ours, inputs[0]) / mib:.0f} MiB (torch "
                       f"+{_peak_bytes(native, inputs[0]) / mib:.0f} MiB, output "
                       f"{out.numel() * out.element_size() / mib:.0f} MiB)")
        return ok, detail
    return check


def _case(name, shape, dtype, p, cpu_shape, mode="constant", channels_last=False, **kw) -> Case:
    import torch.nn.functional as F

    from ..ops.pad import pad

    ours = lambda x: pad(x, p, mode)
    native = lambda x: F.pad(x, p, mode)

    def nbytes(s, itemsize):
        return (_numel(s) + _numel(_out_shape(s, p))) * itemsize

    make = randn_inputs
    if channels_last:
        def make(s, d, dev, seed):
            import torch
            (x,) = randn_inputs(s, d, dev, seed)
            fmt = torch.channels_last_3d if len(s) == 5 else torch.channels_last
            return (x.contiguous(memory_format=fmt),)
    return Case(suite="pad", name=name, shape=shape, dtype=dtype, ours=ours, native=native,
                check=_check(ours, native), nbytes=nbytes, cpu_shape=cpu_shape, make=make, **kw)


CAUSAL = (1, 1, 1, 1, 2, 0)
TEMPORAL = (0, 0, 0, 0, 2, 0)


def cases() -> list:
    return [
        _case("wan causal 3x90x160", (1, 384, 3, 90, 160), "bfloat16", CAUSAL, (1, 3, 3, 9, 16),
              quick=True),
        _case("wan causal 3x90x160", (1, 384, 3, 90, 160), "float32", CAUSAL, (1, 3, 3, 9, 16)),
        _case("wan causal cl3d", (1, 384, 3, 90, 160), "bfloat16", CAUSAL, (1, 3, 3, 9, 16),
              channels_last=True),
        _case("wan temporal 3x90x160", (1, 384, 3, 90, 160), "bfloat16", TEMPORAL, (1, 3, 3, 9, 16)),
        _case("wan causal 1x720x1280", (1, 96, 1, 720, 1280), "bfloat16", CAUSAL, (1, 2, 1, 20, 30),
              quick=True),
        _case("wan temporal 1x720x1280", (1, 96, 1, 720, 1280), "bfloat16", TEMPORAL, (1, 2, 1, 20, 30)),
        _case("wan causal 1x720x1280", (1, 96, 1, 720, 1280), "float32", CAUSAL, (1, 2, 1, 20, 30)),
        _case("replicate 2d 480x832", (1, 128, 480, 832), "bfloat16", (1, 1, 1, 1), (1, 3, 13, 17),
              mode="replicate"),
        _case("reflect 2d 512x512", (1, 64, 512, 512), "bfloat16", (1, 1, 1, 1), (1, 3, 13, 17),
              mode="reflect"),
        _case("small decode pad", (1, 16, 1, 60, 104), "bfloat16", CAUSAL, (1, 2, 1, 6, 10), graphs=True),
    ]
