"""Tensors on a GPU other than the current one (a model on ``cuda:1`` while ``cuda:0`` is
current, as ``device_map`` places it): every launch must run on the tensors' GPU, with its
stream, and give the answer the same call gives on ``cuda:0`` (the same kernels, so the same
bits). Needs two GPUs."""
import pytest
import torch
import torch.nn.functional as F

import fastpath

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")


def _calls(dev):
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g).to(dtype=dtype, device=dev)
    x1, x64, w = r(1, 1, 4096), r(64, 4096), r(4096, 4096) / 64
    logits = r(8, 32000, dtype=torch.float32)
    q, k, v = r(2, 32, 1, 128), r(2, 8, 300, 128), r(2, 8, 300, 128)
    qp = r(1, 32, 77, 128)
    hs, ids = r(3, 256), torch.tensor([[0, 5], [7, 1], [3, 3]], device=dev)
    gu, dn = r(8, 2 * 128, 256) / 16, r(8, 256, 128) / 16
    wq, sq = fastpath.quantize_fp8(w, "rowwise")
    return {
        "linear one row": lambda: fastpath.linear(x1, w),
        "linear one row again (launch memo)": lambda: fastpath.linear(x1, w),
        "linear 64 rows": lambda: fastpath.linear(x64, w),
        "fp8 weights": lambda: fastpath.linear(x1, wq, weight_scale=sq),
        "softmax": lambda: fastpath.softmax(logits, -1),
        "rms_norm": lambda: fastpath.rms_norm(x64, w[0]),
        "decode attention": lambda: fastpath.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        "prefill attention": lambda: fastpath.scaled_dot_product_attention(qp, qp, qp, is_causal=True),
        "fused_experts": lambda: fastpath.fused_experts(hs, ids, torch.full((3, 2), 0.5, device=dev), gu, dn),
        "pad": lambda: fastpath.pad(r(1, 4, 3, 20, 20), (1, 1, 1, 1, 2, 0), mode="replicate"),
        "inv": lambda: fastpath.linalg.inv(r(100, 8, 8, dtype=torch.float32) + 4 * torch.eye(8, device=dev)),
        "bincount": lambda: fastpath.bincount(torch.randint(0, 100, (10000,), generator=g).to(dev), minlength=100),
        "greedy sample": lambda: fastpath.sample(logits, temperature=0.0),
    }


def test_ops_on_the_second_gpu_while_the_first_is_current():
    torch.cuda.set_device(0)
    ref = {name: fn() for name, fn in _calls(torch.device("cuda:0")).items()}
    got = {name: fn() for name, fn in _calls(torch.device("cuda:1")).items()}
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0
    for name in ref:
        a, b = got[name], ref[name]
        assert a.device == torch.device("cuda:1"), name
        assert torch.equal(a.cpu(), b.cpu()), name


def test_graph_capture_on_the_second_gpu():
    """A decode-shaped linear captured in a CUDA graph on cuda:1 (the engine's mode) while
    cuda:0 is current, replayed with new inputs."""
    torch.cuda.set_device(0)
    dev = torch.device("cuda:1")
    x, w = torch.randn(1, 4096, device=dev).bfloat16(), (torch.randn(4096, 4096, device=dev) / 64).bfloat16()
    s = torch.cuda.Stream(device=dev)
    with torch.cuda.device(dev), torch.cuda.stream(s):
        fastpath.linear(x, w)  # warm up (compile) outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            out = fastpath.linear(x, w)
    x.copy_(torch.randn(1, 4096, device=dev).bfloat16())
    with torch.cuda.device(dev):
        graph.replay()
    torch.cuda.synchronize(dev)
    assert torch.allclose(out.float(), F.linear(x.float(), w.float()), rtol=2e-2, atol=2e-2)
