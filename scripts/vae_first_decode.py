"""What the first decode in a fresh process costs: stock, then ``optimize_vae`` with its defaults
(float32 turns on cuDNN's algorithm search, whose cost falls on the first decode of a shape; the
Triton kernels compile on first use unless Triton's cache already holds them). Wall times with a
synchronize; random weights with the real config, the first latent shape of
``fastpath.bench.conv.VAES``.

    PYTHONPATH=src python3 scripts/vae_first_decode.py [wan2.2|wan2.1|qwen-image] [--dtype float32]
        [--cudnn-benchmark auto|on|off]
"""
import argparse
import time

import torch

from fastpath.bench.conv import VAES


def _timed(fn) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.no_grad():
        fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("vae", nargs="?", default="wan2.2")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--cudnn-benchmark", default="auto", choices=["auto", "on", "off"],
                   help="optimize_vae(..., cudnn_benchmark=None|True|False). Run once with off and again "
                        "(a new process, Triton's cache now warm) with auto: the two first decodes "
                        "separate the Triton compiles from cuDNN's search")
    a = p.parse_args()
    import diffusers

    from fastpath.integrations.diffusers import cudnn_benchmark_for, optimize_vae
    cls, cfg, latents = VAES[a.vae]
    dt = getattr(torch, a.dtype)
    vae = getattr(diffusers, cls)(**cfg).to("cuda", dt).eval()
    z = torch.randn(1, *latents[0], device="cuda", dtype=dt)
    stock = [_timed(lambda: vae.decode(z)) for _ in range(2)]
    optimize_vae(vae, cudnn_benchmark={"auto": None, "on": True, "off": False}[a.cudnn_benchmark])
    ours = [_timed(lambda: vae.decode(z)) for _ in range(3)]
    print(f"{a.vae} {a.dtype} latent {list(latents[0])}: stock first {stock[0]:.2f} s, then {stock[1]:.2f} s | "
          f"optimize_vae (cudnn_benchmark {cudnn_benchmark_for(vae, z)}) first {ours[0]:.2f} s, "
          f"then {ours[1]:.2f} s, {ours[2]:.2f} s", flush=True)


if __name__ == "__main__":
    main()
