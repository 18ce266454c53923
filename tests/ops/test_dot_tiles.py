"""The GPU plans' ``tl.dot`` K tiles: Triton's GPU compiler (triton 3.6's ``min_dot_size``) rejects a
dot whose K is below 16 (32 for 8-bit operands); its interpreter, which runs the CPU suite, does not
check. So each plan function is called here as on a GPU (its module's INTERPRET off) over small and
odd problem sizes, and every K tile it gives a dot must compile. (linear's plans: test_linear's
``test_plans_dot_k_tiles_compile``; the compiled fuzz sweep found two such failures on the GPU.)"""
import pytest
import torch

from fastpath.ops import attention, conv3d, grouped_mm, moe_kernels

SIZES = [1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 67, 100, 300, 4096]


def test_grouped_mm_blocks(monkeypatch):
    monkeypatch.setattr(grouped_mm, "INTERPRET", False)
    for rows in SIZES:
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            assert grouped_mm.blocks(rows, dt)[2] >= 16, (rows, dt)


def test_conv3d_blocks(monkeypatch):
    monkeypatch.setattr(conv3d, "INTERPRET", False)
    for M in (1, 100, 5000):
        for N in SIZES:
            for C in SIZES:
                for dt in (torch.float16, torch.bfloat16, torch.float32):
                    assert conv3d.blocks(M, N, C, dt)[2] >= 16, (M, N, C, dt)


def test_attention_decode_blocks(monkeypatch):
    monkeypatch.setattr(attention, "INTERPRET", False)
    for D in [d for d in SIZES if d <= attention.MAX_HEAD_DIM] + [attention.MAX_HEAD_DIM]:
        for DV in (1, 64, attention.MAX_HEAD_DIM):
            for rows in (1, 4, 16, 64):
                for itemsize in (2, 4):
                    br, bn, bd, bdv, warps = attention._decode_blocks(D, DV, rows, itemsize)
                    # q @ k^T takes K = bd; p @ v takes K = bn (keys)
                    assert bd >= 16 and bn >= 16 and bd >= D and bdv >= DV, (D, DV, rows, itemsize)


@pytest.mark.parametrize("w_bytes", [1, 2, 4])
def test_moe_decode_plan(monkeypatch, w_bytes):
    monkeypatch.setattr(moe_kernels, "INTERPRET", False)
    monkeypatch.setattr(moe_kernels, "num_sms", lambda dev: 132)
    for T in (1, 2, 9, 16, 48):
        for H in (1, 8, 15, 64, 2048):
            for NI in (1, 8, 15, 64, 768):
                p = moe_kernels.decode_plan(T, 8, 128, H, NI, torch.device("cuda"), w_bytes)
                least = 32 if w_bytes == 1 else 16
                assert p.block_h >= least and p.block_k >= least, (T, H, NI, w_bytes, p)
