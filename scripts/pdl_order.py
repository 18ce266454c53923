"""GPU check: which global loads a compiled kernel issues before its PDL wait. Runs one
decode step of ``qkv_rope_attention`` (so that its kernel variant compiles), then prints,
for every compiled variant of the decode attention kernel, the PTX global loads before and
after ``griddepcontrol.wait`` (ptxas keeps the order of the volatile wait).

    PYTHONPATH=src python3 scripts/pdl_order.py
"""
import torch

from fastpath.ops import attention as A
from fastpath.ops.rope_attention import qkv_rope_attention


def main():
    B, S, D, nh, nkv = 1, 1024, 128, 32, 4
    dev = torch.device("cuda")
    qkv = torch.randn(B, 1, (nh + 2 * nkv) * D, device=dev, dtype=torch.bfloat16)
    ck = torch.randn(B, S, nkv, D, device=dev, dtype=torch.bfloat16)
    cv = torch.randn_like(ck)
    inv = 1.0 / 10000 ** (torch.arange(0, D, 2, device=dev).float() / D)
    w = torch.ones(D, device=dev, dtype=torch.bfloat16)
    qkv_rope_attention(qkv, torch.tensor([[600]], device=dev), inv, nh, nkv, ck, cv, w, w)
    torch.cuda.synchronize()
    for cache in A._decode_kernel.device_caches.values():
        for key, kernel in cache[0].items():
            lines = kernel.asm["ptx"].splitlines()
            wait = next((i for i, s in enumerate(lines) if "griddepcontrol.wait" in s), None)
            loads = [i for i, s in enumerate(lines) if "ld.global" in s]
            before = sum(1 for i in loads if wait is not None and i < wait)
            print(f"variant {str(key)[:60]}...: wait at line {wait}, ld.global before / after: {before} / "
                  f"{len(loads) - before}; registers {kernel.n_regs}, spills {kernel.n_spills}")


if __name__ == "__main__":
    main()
