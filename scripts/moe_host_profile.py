"""Host time of one eager one-token experts call: fastpath.fused_experts (and through the
transformers "fastpath" experts entry) against transformers' "grouped_mm" experts, with a
cProfile of the fastpath call. Qwen3-30B-A3B shapes, bf16. Run on a GPU machine:

    PYTHONPATH=src python3 scripts/moe_host_profile.py
"""
import cProfile
import pstats

import torch

from fastpath.bench.harness import host_us
from fastpath.ops import moe

dev = torch.device("cuda")
H, I, E, K = 2048, 768, 128, 8


def main():
    x = torch.randn(1, H, device=dev).bfloat16()
    gu = (torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).bfloat16()
    dn = (torch.randn(E, H, I, device=dev) * I ** -0.5).bfloat16()
    w, ids = moe.route(torch.randn(1, E, device=dev), K, norm_topk_prob=True)
    print(f"fastpath.fused_experts: {host_us(lambda: moe.fused_experts(x, ids, w, gu, dn), n=300, warmup=20):.1f} us host per call")
    print(f"fastpath.route: {host_us(lambda: moe.route(torch.randn(1, E, device=dev), K), n=300, warmup=20):.1f} us host per call")
    try:
        import transformers
        from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

        from fastpath.integrations import transformers as fpt
        fpt.register()
        cfg = transformers.Qwen3MoeConfig(hidden_size=H, moe_intermediate_size=I, num_experts=E,
                                          num_experts_per_tok=K)
        for impl in ("grouped_mm", "fastpath"):
            cfg._experts_implementation = impl
            m = Qwen3MoeExperts(cfg).to(dev, torch.bfloat16)
            with torch.no_grad():
                print(f"transformers Qwen3MoeExperts ({impl}): {host_us(lambda: m(x, ids, w), n=300, warmup=20):.1f} us host per call")
    except Exception as e:  # noqa: BLE001
        print("transformers part failed:", repr(e)[:200])
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(200):
        moe.fused_experts(x, ids, w, gu, dn)
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
