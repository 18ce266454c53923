"""conv suite: causal_conv3d on the Wan VAE decoder's shapes, depthwise causal conv1d (LFM2 /
Qwen3.5 shapes) and audio conv1d, each against the PyTorch-native way; plus a VAE decode
report (time and peak memory, stock diffusers vs ``optimize_vae``), which is not a Case:

    python -m fastpath.bench conv                     # the kernels
    python -m fastpath.bench.conv vae [--dtype bfloat16] [--only wan2.1] [--conv auto|triton|torch|taps]
                                      [--channels-last auto|on|off] [--cudnn-benchmark]  # whole decodes

causal_conv3d rows: ``(C_in, C_out, T, H, W)`` of one decoder chunk with a 2-frame cache,
kernel 3x3x3 (and Wan's 3x1x1 time_conv). "native" is what diffusers' ``CausalConv3d`` does
(``torch.cat`` with the cache, ``F.pad``, ``F.conv3d``) plus the cache clone its blocks take;
ours also returns the new cache. "cl" rows: channels-last-3d activations; "lean torch" rows:
fastpath's PyTorch path (history frames concatenated, spatial padding inside cuDNN).
"""
from __future__ import annotations

import argparse
import copy
import time

from .harness import Case, close_check

#: Wan2.1 decoder, 480x832, one later chunk: (C_in, C_out, T, H, W).
WAN_SHAPES = [(384, 384, 1, 60, 104), (384, 384, 2, 120, 208), (192, 192, 4, 240, 416), (96, 96, 4, 480, 832),
              (96, 3, 4, 480, 832)]


def _conv3d_inputs(shape, dtype, device, seed, kernel=(3, 3, 3), channels_last=False):
    import torch
    cin, cout, t, h, w = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(1, cin, t, h, w, generator=g, device=device).to(dt)
    cache = torch.randn(1, cin, 2, h, w, generator=g, device=device).to(dt)
    fan = cin * kernel[0] * kernel[1] * kernel[2]
    wt = (torch.randn(cout, cin, *kernel, generator=g, device=device) * fan ** -0.5).to(dt)
    b = torch.randn(cout, generator=g, device=device).to(dt)
    if channels_last:
        x, cache = (v.contiguous(memory_format=torch.channels_last_3d) for v in (x, cache))
    return x, cache, wt, b


def _native3d(x, cache, w, b):
    """diffusers' CausalConv3d.forward with a cache, plus the cache clone its blocks take."""
    import torch
    import torch.nn.functional as F
    pt, ph, pw = w.shape[2] - 1, (w.shape[3] - 1) // 2, (w.shape[4] - 1) // 2
    new = x[:, :, -2:].clone()
    xx = F.pad(torch.cat([cache, x], 2), (pw, pw, ph, ph, pt - cache.shape[2], 0))
    return F.conv3d(xx, w, b), new


def _nbytes3d(kernel):
    def nbytes(shape, itemsize):
        cin, cout, t, h, w = shape
        return ((cin * (t + 2) + cout * t) * h * w + cout * cin * kernel[0] * kernel[1] * kernel[2]) * itemsize
    return nbytes


def _conv3d_cases() -> list:
    from ..ops.conv3d import causal_conv3d, conv3d_forward, new_cache
    out = []
    for shape in WAN_SHAPES:
        for dtype in ("bfloat16", "float32"):
            for cl in (False, True):
                if dtype == "float32" and cl:
                    continue
                mk = (lambda cl_: lambda s, d, dev, seed: _conv3d_inputs(s, d, dev, seed, channels_last=cl_))(cl)
                name = f"causal_conv3d{' cl' if cl else ''}"
                out.append(Case(suite="conv", name=name, shape=shape, dtype=dtype,
                                ours=lambda x, c, w, b: causal_conv3d(x, w, b, (2, 1, 1), c)[0],
                                native=lambda x, c, w, b: _native3d(x, c, w, b)[0],
                                check=close_check, nbytes=_nbytes3d((3, 3, 3)), cpu_shape=(16, 7, 2, 5, 6),
                                make=mk, quick=shape[0] == 192 and dtype == "bfloat16"))
        out.append(Case(suite="conv", name="causal_conv3d lean torch", shape=shape, dtype="bfloat16",
                        ours=lambda x, c, w, b: (conv3d_forward(x, w, b, (2, 1, 1), c, use_kernel=False),
                                                 new_cache(x, c, 2))[0],
                        native=lambda x, c, w, b: _native3d(x, c, w, b)[0],
                        check=close_check, nbytes=_nbytes3d((3, 3, 3)), cpu_shape=(16, 7, 2, 5, 6),
                        make=_conv3d_inputs))
    tc = (384, 768, 1, 60, 104)  # upsample3d time_conv (3, 1, 1)
    out.append(Case(suite="conv", name="causal_conv3d 3x1x1", shape=tc, dtype="bfloat16",
                    ours=lambda x, c, w, b: causal_conv3d(x, w, b, (2, 0, 0), c)[0],
                    native=lambda x, c, w, b: _native3d(x, c, w, b)[0],
                    check=close_check, nbytes=_nbytes3d((3, 1, 1)), cpu_shape=(16, 9, 1, 3, 5),
                    make=lambda s, d, dev, seed: _conv3d_inputs(s, d, dev, seed, kernel=(3, 1, 1))))
    return out


def _dw_inputs(shape, dtype, device, seed, btc=True):
    import torch
    b, c, t, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn(b, t, c, generator=g, device=device).to(dt).transpose(1, 2)  # transformers' layout
    w = (torch.randn(c, k, generator=g, device=device) * k ** -0.5).to(dt)
    bias = torch.randn(c, generator=g, device=device).to(dt)
    state = torch.randn(b, c, k, generator=g, device=device).to(dt)
    return x, w, bias, state, state.clone()  # one state for ours, one for the native way: both update theirs


def _hf_update(x, state, w, bias):
    """transformers' torch causal_conv1d_update (LFM2 / Qwen3.5)."""
    import torch
    import torch.nn.functional as F
    full = torch.cat([state, x], dim=-1)
    state.copy_(full[:, :, -state.shape[-1]:])
    out = F.conv1d(full, w.unsqueeze(1), bias, padding=0, groups=x.shape[1])
    return F.silu(out[:, :, -x.shape[-1]:])


def _short_inputs(shape, dtype, device, seed):
    """LFM2's in-projection output (B, T, 3C) = [b | c | x], the conv weight and two states."""
    import torch
    x, w, _, state, state2 = _dw_inputs(shape, dtype, device, seed)
    b, c, t, k = shape
    g = torch.Generator(device=device).manual_seed(seed + 1)
    bcx = torch.randn(b, t, 3 * c, generator=g, device=device).to(x.dtype)
    return bcx, w, state[:, :, 1:].contiguous(), state2[:, :, 1:].contiguous()


def _hf_short_conv(bcx, w, state):
    """transformers' LFM2 short convolution (decode): b * x, the torch conv update, c * y."""
    import torch
    import torch.nn.functional as F
    b, c, x = bcx.chunk(3, dim=-1)
    bx = (b * x).transpose(1, 2)
    full = torch.cat([state, bx], dim=-1)
    state.copy_(full[:, :, -state.shape[-1]:])
    y = F.conv1d(full, w.unsqueeze(1), groups=bx.shape[1])
    return c * y[:, :, -bx.shape[-1]:].transpose(1, 2)


def _hf_prefill(x, w, bias):
    import torch.nn.functional as F
    k = w.shape[-1]
    return F.silu(F.conv1d(x, w.unsqueeze(1), bias, padding=k - 1, groups=x.shape[1])[:, :, :x.shape[-1]])


def _conv1d_cases() -> list:
    from ..ops.conv1d import causal_conv1d, causal_conv1d_update, conv1d, short_conv
    out = []
    for shape in [(1, 2048, 1, 3), (8, 2048, 1, 3), (1, 8192, 1, 4), (32, 8192, 1, 4)]:  # LFM2, Qwen3.5 decode
        out.append(Case(suite="conv", name="causal_conv1d_update", shape=shape, dtype="bfloat16",
                        ours=lambda x, w, b, s, s2: causal_conv1d_update(x[:, :, 0], s, w, b, "silu"),
                        native=lambda x, w, b, s, s2: _hf_update(x, s2, w, b)[:, :, 0],
                        check=close_check, nbytes=lambda sh, it: (sh[0] * sh[1] * (2 * sh[3] + 2) + sh[1] * sh[3]) * it,
                        cpu_shape=(2, 67, 1, 4), make=_dw_inputs, graphs=True, quick=shape[0] == 1))
    for shape in [(1, 2048, 1, 3), (8, 2048, 1, 3)]:  # LFM2's whole short convolution, decode
        out.append(Case(suite="conv", name="short_conv", shape=shape, dtype="bfloat16",
                        ours=lambda bcx, w, s, s2: short_conv(bcx, s, w),
                        native=lambda bcx, w, s, s2: _hf_short_conv(bcx, w, s2),
                        check=close_check, nbytes=lambda sh, it: (sh[0] * sh[1] * (4 * sh[2] + 2 * sh[3] - 2)
                                                                  + sh[1] * sh[3]) * it,
                        cpu_shape=(2, 67, 1, 3), make=_short_inputs, graphs=True, quick=shape[0] == 1))
    for shape in [(1, 2048, 4096, 3), (1, 8192, 4096, 4)]:
        out.append(Case(suite="conv", name="causal_conv1d prefill", shape=shape, dtype="bfloat16",
                        ours=lambda x, w, b, s, s2: causal_conv1d(x, w, b, None, "silu")[0],
                        native=lambda x, w, b, s, s2: _hf_prefill(x, w, b),
                        check=close_check, nbytes=lambda sh, it: 2 * sh[0] * sh[1] * sh[2] * it,
                        cpu_shape=(1, 67, 13, 4), make=_dw_inputs))

    def audio(shape, dtype, device, seed):
        import torch
        b, cin, cout, length, k, _ = shape
        g = torch.Generator(device=device).manual_seed(seed)
        dt = getattr(torch, dtype)
        return (torch.randn(b, cin, length, generator=g, device=device).to(dt),
                (torch.randn(cout, cin, k, generator=g, device=device) * (cin * k) ** -0.5).to(dt),
                torch.randn(cout, generator=g, device=device).to(dt))

    import torch.nn.functional as F
    for shape in [(1, 128, 1280, 3000, 3, 1), (1, 1280, 1280, 3000, 3, 2), (8, 80, 512, 3000, 3, 1)]:  # Whisper
        s = shape[5]
        out.append(Case(suite="conv", name="conv1d", shape=shape, dtype="bfloat16",
                        ours=(lambda s_: lambda x, w, b: conv1d(x, w, b, s_, 1))(s),
                        native=(lambda s_: lambda x, w, b: F.conv1d(x, w, b, s_, 1))(s),
                        check=close_check, nbytes=lambda sh, it: (sh[0] * (sh[1] + sh[2] // sh[5]) * sh[3]
                                                                  + sh[1] * sh[2] * sh[4]) * it,
                        cpu_shape=(1, 16, 9, 40, 3, s), make=audio))
    return out


def cases() -> list:
    return _conv3d_cases() + _conv1d_cases()


# ---------------------------------------------------------------------------- VAE decode report

#: Real configs (random weights): Wan2.1 VAE, Wan2.2 TI2V-5B VAE, Qwen-Image VAE; latent shapes
#: of 81 frames at 480x832 (and 704x1280), one 1024x1024 image.
VAES = {
    "wan2.1": ("AutoencoderKLWan", {}, [(16, 21, 60, 104), (16, 21, 88, 160)]),
    "wan2.2": ("AutoencoderKLWan", dict(base_dim=160, decoder_base_dim=256, z_dim=48, is_residual=True,
                                        in_channels=12, out_channels=12, patch_size=2, scale_factor_spatial=16),
               [(48, 21, 30, 52), (48, 21, 44, 80)]),
    "qwen-image": ("AutoencoderKLQwenImage", {}, [(16, 1, 128, 128)]),
}


def _timed_decode(vae, z):
    import torch
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = vae.decode(z).sample
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0, (torch.cuda.max_memory_allocated() - base) / 2**30


def vae_report(names, dtype: str, conv: str = "auto", json_path=None, channels_last=None,
               cudnn_benchmark=None) -> int:
    import math

    import diffusers
    import torch

    from ..integrations.diffusers import channels_last_for, cudnn_benchmark_for, optimize_vae, restore_vae
    from . import harness
    env = harness.environment(f"python -m fastpath.bench.conv vae --dtype {dtype}")
    path = harness.results_path(env, json_path)
    dt = getattr(torch, dtype)
    failed = 0
    for name in names:
        cls_name, cfg, latents = VAES[name]
        torch.manual_seed(0)
        vae = getattr(diffusers, cls_name)(**cfg).to("cuda", dt).eval()
        # 16-bit runs: a float32 decode of the same weights is the reference both are held to
        vae32 = copy.deepcopy(vae).float() if dt != torch.float32 else None
        for shape in latents:
            z = torch.randn(1, *shape, device="cuda", dtype=dt)
            restore_vae(vae)
            _timed_decode(vae, z[:, :, :2])  # warm-up (cuDNN heuristics)
            ref, t_stock, m_stock = _timed_decode(vae, z)
            ref = ref.cpu().float()
            optimize_vae(vae, conv=conv, channels_last=channels_last, cudnn_benchmark=cudnn_benchmark)
            _timed_decode(vae, z[:, :, :2])  # warm-up (Triton compiles)
            out, t_ours, m_ours = _timed_decode(vae, z)
            out = out.cpu().float()
            err = harness.rel_error(out, ref)
            mse = (out - ref).square().mean().item()
            psnr = 10 * math.log10(4.0 / mse) if mse > 0 else float("inf")  # range [-1, 1]
            row = {}
            if vae32 is not None:
                with torch.no_grad():
                    exact = vae32.decode(z.float()).sample.cpu()
                row = {"stock_err_f32": harness.rel_error(ref, exact), "ours_err_f32": harness.rel_error(out, exact)}
                del exact
                # no less accurate than the stock decoder in the same dtype (25% slack)
                ok = row["ours_err_f32"] <= 1.25 * row["stock_err_f32"] + 1e-4
                acc = (f" | vs float32: stock {row['stock_err_f32']:.1e}, ours {row['ours_err_f32']:.1e}")
            else:
                ok, acc = err <= 1e-3, ""
            failed += not ok
            row = {"suite": "vae", "case": f"vae decode {name}", "shape": list(shape), "dtype": dtype,
                   "mode": "eager", "conv": conv, "channels_last": channels_last_for(vae, z),  # the layout that ran
                   "cudnn_benchmark": cudnn_benchmark_for(vae, z),  # the setting that ran
                   "stock_s": t_stock, "ours_s": t_ours, "speedup": t_stock / t_ours,
                   "stock_peak_gib": m_stock, "ours_peak_gib": m_ours, "memory_ratio": m_ours / m_stock,
                   "rel_err": err, "psnr_db": psnr, "ok": ok, **row}
            print(f"{name:<11} latent {'x'.join(map(str, shape)):<14} {dtype:<9} stock {t_stock:7.3f} s "
                  f"{m_stock:6.2f} GiB | ours {t_ours:7.3f} s {m_ours:6.2f} GiB | {t_stock / t_ours:5.2f}x time, "
                  f"{m_ours / m_stock:4.2f}x memory | vs stock: rel err {err:.1e}, PSNR {psnr:.1f} dB{acc}"
                  f"{'' if ok else ' | FAIL'}", flush=True)
            harness.append_record(path, {**env, **row})
            del out, ref
        del vae, vae32
        torch.cuda.empty_cache()
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fastpath.bench.conv")
    p.add_argument("what", choices=["vae"])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--only", choices=list(VAES), action="append")
    p.add_argument("--conv", default="auto", choices=["auto", "triton", "torch", "taps"])
    p.add_argument("--channels-last", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--cudnn-benchmark", nargs="?", const="on", default="auto", choices=["auto", "on", "off"],
                   help="optimize_vae(..., cudnn_benchmark=None|True|False); alone: on")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    cl = {"auto": None, "on": True, "off": False}[args.channels_last]
    cb = {"auto": None, "on": True, "off": False}[args.cudnn_benchmark]
    return vae_report(args.only or list(VAES), args.dtype, args.conv, args.json, cl, cb)


if __name__ == "__main__":
    raise SystemExit(main())
