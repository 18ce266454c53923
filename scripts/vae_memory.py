"""Where a VAE decode reaches its peak memory: every module's forward is bracketed by hooks
that read and reset the allocator's peak counter (host-side counters: no sync), so each
interval's peak is charged to the module running it (``name`` inside its own forward,
``name+`` for its own code between two children). Prints the top intervals.

    PYTHONPATH=src python3 scripts/vae_memory.py [wan2.1|wan2.2|qwen-image] [--stock] [--frames 21] [--conv taps]
        [--trace up_blocks.3.resnets.2.conv2]
"""
import argparse
import sys

import torch

sys.path.insert(0, "src")
from fastpath.bench.conv import VAES  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("vae", nargs="?", default="wan2.1")
    p.add_argument("--stock", action="store_true")
    p.add_argument("--frames", type=int, default=0)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--conv", default="auto", help="optimize_vae(..., conv=...)")
    p.add_argument("--trace", metavar="TEXT", help="also list every call of the modules whose label has TEXT, in order")
    a = p.parse_args()
    import diffusers

    from fastpath.integrations.diffusers import optimize_vae
    cls, cfg, latents = VAES[a.vae]
    dt = getattr(torch, a.dtype)
    vae = getattr(diffusers, cls)(**cfg).to("cuda", dt).eval()
    if not a.stock:
        optimize_vae(vae, conv=a.conv)
    shape = list(latents[0])
    if a.frames:
        shape[1] = a.frames
    z = torch.randn(1, *shape, device="cuda", dtype=dt)
    stack, peaks, trace = [], {}, []

    def charge(label):
        pk = torch.cuda.max_memory_allocated()
        if a.trace and a.trace in label:
            trace.append((label, pk, torch.cuda.memory_allocated()))
        if pk > peaks.get(label, (0,))[0]:
            peaks[label] = (pk, torch.cuda.memory_allocated())
        torch.cuda.reset_peak_memory_stats()

    def pre(name):
        def hook(mod, args):
            charge((stack[-1] + "+") if stack else "<top>")
            stack.append(name)
        return hook

    def post(name):
        def hook(mod, args, out):
            charge(name)
            stack.pop()
        return hook

    for name, mod in vae.named_modules():
        if name:
            mod.register_forward_pre_hook(pre(f"{name} ({type(mod).__name__})"))
            mod.register_forward_hook(post(f"{name} ({type(mod).__name__})"))
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        out = vae.decode(z).sample
    charge("<top>")
    del out
    gib = 2.0**30
    what = "stock" if a.stock else "optimize_vae conv=" + a.conv
    print(f"{a.vae} {what} latent {shape} {a.dtype}: weights+input {base / gib:.2f} GiB")
    for label, (pk, now) in sorted(peaks.items(), key=lambda kv: -kv[1][0])[:18]:
        print(f"  peak {(pk - base) / gib:6.2f} GiB above base (live after {(now - base) / gib:6.2f})  {label}")
    for i, (label, pk, now) in enumerate(trace):
        print(f"  call {i:4d} peak {(pk - base) / gib:6.2f} live after {(now - base) / gib:6.2f}  {label}")


if __name__ == "__main__":
    main()
