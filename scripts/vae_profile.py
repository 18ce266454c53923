"""Where a VAE decode's GPU time goes: the PyTorch profiler over one decode (after a warm-up
decode), kernel time summed by kernel name, for the stock decoder and for ``optimize_vae`` on
the same weights. Random weights with the real config, the first latent shape of
``fastpath.bench.conv.VAES``.

    PYTHONPATH=src python3 scripts/vae_profile.py [wan2.2|wan2.1|qwen-image] [--dtype bfloat16] [--top 25]
        [--channels-last] [--no-stock]
"""
import argparse
import copy

import torch

from fastpath.bench.conv import VAES
from fastpath.bench.harness import kernel_times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("vae", nargs="?", default="wan2.2")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--channels-last", action="store_true", help="optimize_vae(..., channels_last=True)")
    p.add_argument("--no-stock", action="store_true", help="profile only optimize_vae")
    a = p.parse_args()
    import diffusers

    from fastpath.integrations.diffusers import optimize_vae
    cls, cfg, latents = VAES[a.vae]
    dt = getattr(torch, a.dtype)
    stock = getattr(diffusers, cls)(**cfg).to("cuda", dt).eval()
    ours = optimize_vae(copy.deepcopy(stock), channels_last=True if a.channels_last else None)
    z = torch.randn(1, *latents[0], device="cuda", dtype=dt)
    runs = [("optimize_vae" + (" channels_last" if a.channels_last else ""), ours)]
    for name, vae in ([] if a.no_stock else [("stock", stock)]) + runs:
        with torch.no_grad():
            vae.decode(z)  # warm-up
            times = kernel_times(lambda: vae.decode(z), reps=1)
        total = sum(us for us, _ in times.values())
        print(f"== {a.vae} {name} {a.dtype} latent {list(latents[0])}: kernels {total / 1e3:.1f} ms", flush=True)
        for k, (us, calls) in sorted(times.items(), key=lambda kv: -kv[1][0])[:a.top]:
            print(f"  {us / 1e3:8.2f} ms {100 * us / total:5.1f}% {calls:6.0f}x  {k[:90]}", flush=True)


if __name__ == "__main__":
    main()
