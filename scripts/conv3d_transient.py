"""Memory and time of one streamed-tail causal convolution (one frame in, a two-frame cache) on
each path: how far the allocator's peak rises above what was live before the call (output,
window, cuDNN workspace), and the median time. Shapes: Wan2.1's full-resolution decoder layers.

    PYTHONPATH=src python3 scripts/conv3d_transient.py [--dtype bfloat16] [--hw 480x832] [--layers 256x12x240x416]
"""
import argparse

import torch

from fastpath.ops.conv3d import conv3d_forward, reference_causal_conv3d, tap_sum_conv3d


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--hw", default="480x832")
    p.add_argument("--layers", nargs="*", metavar="CINxCOUTxHxW",
                   help="layers to run instead (e.g. 256x12x240x416: Wan2.2's conv_out)")
    a = p.parse_args()
    dt = getattr(torch, a.dtype)
    H, W = (int(v) for v in a.hw.split("x"))
    cl = torch.channels_last_3d
    layers = [(96, 96, H, W), (192, 192, H // 2, W // 2), (384, 384, H // 4, W // 4)]
    if a.layers:
        layers = [tuple(int(v) for v in spec.split("x")) for spec in a.layers]
    for C, C_out, h, w in layers:
        x = torch.randn(1, C, 1, h, w, device="cuda", dtype=dt).contiguous(memory_format=cl)
        cache = torch.randn(1, C, 2, h, w, device="cuda", dtype=dt).contiguous(memory_format=cl)
        wt = (torch.randn(C_out, C, 3, 3, 3, device="cuda", dtype=dt) * 0.02).contiguous(memory_format=cl)
        b = torch.randn(C_out, device="cuda", dtype=dt)
        paths = {
            "window+cudnn": lambda: conv3d_forward(x, wt, b, (2, 1, 1), cache, False),
            "taps": lambda: tap_sum_conv3d(x, wt, b, (2, 1, 1), cache),
            "triton": lambda: conv3d_forward(x, wt, b, (2, 1, 1), cache, True),
        }
        frame = x.numel() * x.element_size()
        with torch.no_grad():  # float64 on the same inputs: each path's error
            ref = reference_causal_conv3d(x.double(), wt.double(), b.double(), (2, 1, 1), cache.double())
        for name, fn in paths.items():
            with torch.no_grad():
                out = fn()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                del out
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                out = fn()
                torch.cuda.synchronize()
                rise = torch.cuda.max_memory_allocated() - before
                del out
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                times = []
                for _ in range(10):
                    start.record()
                    fn()
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end))
            times.sort()
            print(f"{C:4d}->{C_out:<4d}x{h}x{w} {a.dtype:9s} {name:13s} peak rise {rise / frame:5.2f} frames "
                  f"({rise / 2**20:7.1f} MiB)  {times[len(times) // 2] * 1e3:8.1f} us  rel err vs float64 {err:.1e}",
                  flush=True)


if __name__ == "__main__":
    main()
