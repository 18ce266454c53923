"""Where a VAE decode's GPU time goes: the PyTorch profiler over one decode (after a warm-up
decode), kernel time summed by kernel name, for the stock decoder and for ``optimize_vae`` on
the same weights. Random weights with the real config, the first latent shape of
``fastpath.bench.conv.VAES``.

    PYTHONPATH=src python3 scripts/vae_profile.py [wan2.2|wan2.1|qwen-image] [--dtype bfloat16] [--top 25]
        [--no-stock] [--ops]
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
    p.add_argument("--no-stock", action="store_true", help="profile only optimize_vae")
    p.add_argument("--ops", action="store_true",
                   help="also list ATen ops by input shapes (self GPU time): which copies the kernels are")
    a = p.parse_args()
    import diffusers

    from fastpath.integrations.diffusers import optimize_vae
    cls, cfg, latents = VAES[a.vae]
    dt = getattr(torch, a.dtype)
    stock = getattr(diffusers, cls)(**cfg).to("cuda", dt).eval()
    ours = optimize_vae(copy.deepcopy(stock))  # the defaults (channels-last on CUDA)
    z = torch.randn(1, *latents[0], device="cuda", dtype=dt)
    runs = [("optimize_vae", ours)]
    for name, vae in ([] if a.no_stock else [("stock", stock)]) + runs:
        with torch.no_grad():
            vae.decode(z)  # warm-up
            times = kernel_times(lambda: vae.decode(z), reps=1)
        total = sum(us for us, _ in times.values())
        print(f"== {a.vae} {name} {a.dtype} latent {list(latents[0])}: kernels {total / 1e3:.1f} ms", flush=True)
        for k, (us, calls) in sorted(times.items(), key=lambda kv: -kv[1][0])[:a.top]:
            print(f"  {us / 1e3:8.2f} ms {100 * us / total:5.1f}% {calls:6.0f}x  {k[:90]}", flush=True)
        if a.ops:
            ops_by_shape(lambda: vae.decode(z), a.top)


def ops_by_shape(fn, top):
    """One profiled call of ``fn``: ATen ops grouped by name and input shapes, by self GPU time."""
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages(group_by_input_shape=True) if e.self_device_time_total > 0]
    rows.sort(key=lambda e: -e.self_device_time_total)
    print("  -- ATen ops by input shapes (self GPU time)")
    for e in rows[:top]:
        print(f"  {e.self_device_time_total / 1e3:8.2f} ms {e.count:6d}x  {e.key[:28]:28s} {str(e.input_shapes)[:110]}",
              flush=True)


if __name__ == "__main__":
    main()
