"""optimize_vae: tiny random-config Wan2.1 / Wan2.2 / Qwen-Image VAEs, stock vs optimized decode."""
import copy

import pytest
import torch

diffusers = pytest.importorskip("diffusers", reason="diffusers is not installed (pip install diffusers)")
from diffusers import AutoencoderKLQwenImage, AutoencoderKLWan
from diffusers.models.autoencoders import autoencoder_kl_wan as wan_mod

from fastpath.integrations.diffusers import optimize_vae, restore_vae
from tests.conftest import DEVICE
from tests.tolerances import assert_close

TINY = dict(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, temperal_downsample=[False, True, True])
CONFIGS = {
    "wan2.1": (AutoencoderKLWan, TINY),
    "wan2.2": (AutoencoderKLWan, dict(TINY, decoder_base_dim=16, is_residual=True, in_channels=12, out_channels=12,
                                      patch_size=2, scale_factor_spatial=16)),
    "qwen-image": (AutoencoderKLQwenImage, TINY),
}


pytestmark = pytest.mark.usefixtures("one_thread")


def _vae(name):
    cls, cfg = CONFIGS[name]
    vae = cls(**cfg).eval()
    with torch.no_grad():  # random weights around the initialisation (gammas of 1, zero biases otherwise)
        for p in vae.parameters():
            p.add_(torch.randn(p.shape) * 0.05)
    return vae.to(DEVICE)


@pytest.fixture(autouse=True)
def _no_tf32(monkeypatch):
    """float32 on a GPU: exact convolutions on both sides (stock cuDNN and fastpath's kernel)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_decode_equals_stock(name):
    vae = _vae(name)
    opt = optimize_vae(copy.deepcopy(vae))  # "auto": the Triton kernel on a GPU, the lean PyTorch path on CPU
    z = torch.randn(1, 4, 3, 2, 3, device=DEVICE)  # 3 latent frames -> 9 video frames
    with torch.no_grad():
        ref = vae.decode(z).sample
        out = opt.decode(z).sample
        one = opt.decode(z[:, :, :1]).sample  # (the other calls on one latent frame: a fraction of the time)
        tup = opt.decode(z[:, :, :1], return_dict=False)[0]
    assert out.shape == ref.shape and out.is_contiguous()
    tol = 2e-6 if DEVICE.type == "cpu" else 1e-5
    assert_close(out, ref, torch.float32, tol=tol)
    assert torch.equal(tup, one)
    # the stock class and other instances are untouched
    assert type(vae.decoder.conv_in).forward is not type(opt.decoder.conv_in).forward
    assert isinstance(opt.decoder.conv_in, type(vae.decoder.conv_in))
    assert "_decode" not in vae.__dict__
    restore_vae(opt)
    assert type(opt.decoder.conv_in) is type(vae.decoder.conv_in)
    with torch.no_grad():
        assert_close(opt.decode(z[:, :, :1]).sample, vae.decode(z[:, :, :1]).sample, torch.float32, tol=tol)
    assert_close(one, out[:, :, :one.shape[2]], torch.float32, tol=tol)  # a first frame decodes alone as in a video


def test_qwen_image_round_trip_and_single_frame():
    vae = _vae("qwen-image")
    opt = optimize_vae(copy.deepcopy(vae), conv="torch", channels_last=True)
    x = torch.randn(1, 3, 1, 16, 16, device=DEVICE)
    with torch.no_grad():
        ref = vae(x).sample  # encode + decode of one image
        out = opt(x).sample
    assert out.is_contiguous()
    assert_close(out, ref, torch.float32, tol=2e-6)


def test_triton_kernel_inside_the_modules():
    """The swapped modules on the Triton path (interpreter on CPU): one causal conv with a cache,
    one without, equal to the stock modules."""
    vae = _vae("wan2.1")
    opt = optimize_vae(copy.deepcopy(vae), conv="triton")
    x, cache = torch.randn(1, 8, 2, 3, 5, device=DEVICE), torch.randn(1, 8, 2, 3, 5, device=DEVICE)
    stock_conv, lean_conv = vae.decoder.up_blocks[3].resnets[0].conv1, opt.decoder.up_blocks[3].resnets[0].conv1
    assert isinstance(lean_conv, wan_mod.WanCausalConv3d) and lean_conv.kernel_size == (3, 3, 3)
    with torch.no_grad():
        for c in (None, cache, cache[:, :, 1:]):
            assert_close(lean_conv(x, c), stock_conv(x, c), torch.float32)
        up_stock = vae.decoder.up_blocks[0].upsamplers[0]  # upsample3d: time_conv (3, 1, 1)
        up_lean = opt.decoder.up_blocks[0].upsamplers[0]
        z, zc = torch.randn(1, 16, 1, 2, 3, device=DEVICE), torch.randn(1, 16, 1, 2, 3, device=DEVICE)
        for c in (None, zc):
            assert_close(up_lean.time_conv(z, c), up_stock.time_conv(z, c), torch.float32)
        h = torch.randn(3, 16, 2, 3, device=DEVICE, dtype=torch.bfloat16)  # (B*T, C, H, W)
        assert torch.equal(up_lean.resample[0](h), up_stock.resample[0](h))  # nearest upsampling: bit-identical


def test_errors():
    with pytest.raises(TypeError, match="vae"):
        optimize_vae(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="conv"):
        optimize_vae(_vae("wan2.1"), conv="cudnn")


def test_tap_sum_convolutions_equal_stock():
    vae = _vae("wan2.1")
    opt = optimize_vae(copy.deepcopy(vae), conv="taps")
    z = torch.randn(1, 4, 3, 2, 3, device=DEVICE)
    with torch.no_grad():
        assert_close(opt.decode(z).sample, vae.decode(z).sample, torch.float32,
                     tol=2e-6 if DEVICE.type == "cpu" else 1e-5)


@pytest.mark.parametrize("name", ["wan2.1", "wan2.2"])
def test_tail_streams_one_frame_at_a_time(name):
    """conv_out runs once per output frame (not once per chunk), and the output still equals
    the stock decode (checked above); an image decode keeps no caches."""
    from fastpath.integrations.diffusers import _tail_start
    vae = optimize_vae(_vae(name), conv="torch")
    assert _tail_start(vae.decoder) == len(vae.decoder.up_blocks) - 2  # after the last temporal upsample
    calls, resampled = [], []
    vae.decoder.conv_out.register_forward_hook(lambda m, a, o: calls.append(o.shape[2]))
    block = vae.decoder.up_blocks[-3]
    up2d = (block.upsamplers[0] if name == "wan2.1" else block.upsampler).resample[1]  # (B * frames, C, H, W) in
    up2d.register_forward_pre_hook(lambda m, a: resampled.append(a[0].shape[0]))
    z = torch.randn(1, 4, 3, 2, 3, device=DEVICE)
    with torch.no_grad():
        out = vae.decode(z).sample
    assert calls == [1] * len(calls) and len(calls) == out.shape[2] == 9
    if name == "wan2.1":  # the last temporal upsampler's 2-D convolution also runs per frame
        assert resampled == [1] * 9  # one call per output frame
    else:  # Wan2.2's residual up block adds its shortcut after the upsampler: whole chunks
        assert sorted(set(resampled)) == [1, 4]
    calls.clear()
    seen = []
    conv = vae.decoder.up_blocks[-1].resnets[0].conv1
    conv.register_forward_pre_hook(lambda m, a: seen.append(len(a) > 1 and a[1] is not None))
    with torch.no_grad():
        vae.decode(z[:, :, :1])
    assert calls == [1] and seen == [False]  # one frame, decoded without caches


def test_norms_fused_with_their_silu_and_restored():
    vae = _vae("wan2.1")
    stock_act = type(vae.decoder.up_blocks[0].resnets[0].nonlinearity)
    optimize_vae(vae, conv="torch")
    block = vae.decoder.up_blocks[0].resnets[0]
    assert isinstance(block.nonlinearity, torch.nn.Identity) and block.norm1._fastpath_silu
    assert vae.decoder.norm_out._fastpath_silu and isinstance(vae.decoder.nonlinearity, torch.nn.Identity)
    assert not any("_fastpath_nonlinearity" in n for n, _ in vae.named_modules())  # not a submodule
    restore_vae(vae)
    assert type(block.nonlinearity) is stock_act and "_fastpath_silu" not in block.norm1.__dict__
    assert type(block.norm1) is wan_mod.WanRMS_norm


def test_roll_cache_matches_the_stock_update_in_place():
    """_roll_cache keeps the stock cache semantics (the last two frames of [cache, x]; a first
    single frame after the zero frame the convolution pads with) and, once the cache holds two
    frames of x's shape, writes them into its storage (no second cache)."""
    from fastpath.integrations.diffusers import _roll_cache

    def stock(cache, x):
        new = x[:, :, -2:].clone()
        if new.shape[2] < 2 and cache is not None:
            new = torch.cat([cache[:, :, -1:], new], dim=2)
        return new if new.shape[2] == 2 else torch.cat([torch.zeros_like(new), new], dim=2)

    seen = []

    def conv(x, c):  # records what the convolution saw of the cache when it ran
        seen.append(None if c is None else c.clone())
        return x * 2

    cache, idx, ref = [None], [0], None
    frames = [1, 1, 4, 1, 1, 3, 1]  # a first chunk of one frame, then chunks of 4, 3 and single frames
    for t in frames:
        x = torch.randn(1, 3, t, 2, 5, device=DEVICE)
        before = cache[0]
        idx[0] = 0
        out = _roll_cache(conv, x, cache, idx)
        assert idx[0] == 1 and torch.equal(out, x * 2)
        assert (seen[-1] is None) == (ref is None) and (ref is None or torch.equal(seen[-1], ref))
        ref = stock(ref, x)
        assert torch.equal(cache[0], ref)
        assert cache[0] is before or before is None  # rolled in place from the second chunk on
    x = torch.randn(1, 3, 1, 2, 5, device=DEVICE, requires_grad=True)
    kept = cache[0]
    _roll_cache(conv, x, cache, [0])  # autograd records: a fresh cache, the old one untouched
    assert cache[0] is not kept and torch.equal(cache[0][:, :, -1:], x.detach())


def test_residual_blocks_swapped_only_when_known(monkeypatch):
    """The residual blocks run _resblock_forward where their stock source is the known one; a
    diffusers version with another forward keeps it."""
    from fastpath.integrations import diffusers as fd
    vae = optimize_vae(_vae("wan2.1"), conv="torch")
    block = vae.decoder.up_blocks[0].resnets[0]
    assert type(block).forward is fd._resblock_forward and type(block).__base__ is wan_mod.WanResidualBlock
    restore_vae(vae)
    assert type(block) is wan_mod.WanResidualBlock
    monkeypatch.setattr(fd, "_RESBLOCK_SOURCE", fd._RESBLOCK_SOURCE + ("x = self.conv3(x)",))
    optimize_vae(vae, conv="torch")
    assert type(block) is wan_mod.WanResidualBlock


def test_conv_biases_fold_into_the_norm_and_the_residual_add():
    """Under no_grad the residual blocks run their convolutions without bias (added in the second
    norm and with the shortcut: the decode equality above covers the values); with autograd
    recording they keep the stock composition, and the block's output equals the stock block's."""
    from fastpath.integrations import diffusers as fd
    vae = _vae("wan2.1")
    opt = optimize_vae(copy.deepcopy(vae), conv="torch")
    block, stock = opt.decoder.up_blocks[0].resnets[0], vae.decoder.up_blocks[0].resnets[0]
    x = torch.randn(1, 16, 2, 3, 4, device=DEVICE)
    biases = []
    block.conv2.register_forward_pre_hook(lambda m, a, k: biases.append(k.get("use_bias", True)), with_kwargs=True)
    with torch.no_grad():
        assert fd._bias_folds(block, x)
        assert_close(block(x), stock(x), torch.float32, tol=2e-6 if DEVICE.type == "cpu" else 1e-5)
    assert biases == [False]
    y = block(x)  # grad mode: the parameters require grad
    assert not fd._bias_folds(block, x) and biases[-1] is True and y.requires_grad
    assert_close(y.detach(), stock(x).detach(), torch.float32, tol=2e-6 if DEVICE.type == "cpu" else 1e-5)


@pytest.mark.parametrize("name", ["wan2.1", "wan2.2"])
def test_channels_last_decode_keeps_channels_last(name, monkeypatch):
    """channels_last=True: every residual convolution runs on channels-last-3d input (the stock
    attention and resampling blocks return NCDHW; the next residual block converts back), every
    3x3x3 window reaches cuDNN channels-last (no conversion per call), and the decode equals the
    stock one."""
    from fastpath.ops import conv3d as c3
    from fastpath.ops.conv3d import _is_channels_last
    windows, real = [], c3.F.conv3d
    monkeypatch.setattr(c3.F, "conv3d", lambda inp, w, *a, **k: windows.append(
        w.shape[2:] != (3, 3, 3) or inp.is_contiguous(memory_format=torch.channels_last_3d)) or real(inp, w, *a, **k))
    vae = _vae(name)
    opt = optimize_vae(copy.deepcopy(vae), conv="torch", channels_last=True)
    layouts = []
    for n, m in opt.decoder.named_modules():
        if n.endswith(("conv1", "conv2")):
            m.register_forward_pre_hook(lambda m, a: layouts.append(_is_channels_last(a[0])))
    z = torch.randn(1, 4, 3, 2, 3, device=DEVICE)
    with torch.no_grad():
        ref = vae.decode(z).sample
        windows.clear()  # the stock decoder's NCDHW calls
        out = opt.decode(z).sample
    assert layouts and all(layouts) and windows and all(windows)
    weights = [m.weight for m in opt.decoder.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))]
    assert all(w.is_contiguous(memory_format=torch.channels_last_3d if w.dim() == 5 else torch.channels_last)
               for w in weights)  # converted once, not by cuDNN on every call
    restore_vae(opt)
    assert all(w.is_contiguous() for w in weights)  # as the stock model had them
    assert out.is_contiguous()
    assert_close(out, ref, torch.float32, tol=2e-6 if DEVICE.type == "cpu" else 1e-5)
    optimize_vae(opt, conv="torch", channels_last=True)
    with torch.no_grad():
        opt.decode(z[:, :, :1])  # an image after a channels-last video: the flag was reset
    assert not opt._fastpath["cl_now"]


def test_cudnn_benchmark_default_and_restored(monkeypatch):
    """cudnn_benchmark None: the search is on for float32 decodes on CUDA only; an explicit
    option wins; the global flag holds during the decode and is restored after it."""
    from fastpath.integrations.diffusers import cudnn_benchmark_for
    vae = optimize_vae(_vae("wan2.1"), conv="torch")
    z = torch.randn(1, 4, 2, 2, 3, device=DEVICE)
    assert cudnn_benchmark_for(vae, z) == (DEVICE.type == "cuda")
    assert not cudnn_benchmark_for(vae, z.to(torch.bfloat16))
    optimize_vae(vae, conv="torch", cudnn_benchmark=True)
    assert cudnn_benchmark_for(vae, z.to(torch.bfloat16))
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    seen = []
    vae.decoder.conv_out.register_forward_pre_hook(lambda m, a: seen.append(torch.backends.cudnn.benchmark))
    with torch.no_grad():
        vae.decode(z)
    assert seen and all(seen) and torch.backends.cudnn.benchmark is False
