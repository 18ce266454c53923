"""``optimize_vae(vae)``: lean decoding for diffusers' video / image VAEs, on that instance only.

>>> vae = AutoencoderKLWan.from_pretrained(path, subfolder="vae", torch_dtype=torch.bfloat16).cuda()
>>> fastpath.integrations.diffusers.optimize_vae(vae)      # then vae.decode(...) as before

Supported: ``AutoencoderKLWan`` (Wan2.1, Wan2.2) and ``AutoencoderKLQwenImage`` (diffusers
0.3x-0.42). What changes, on the instance passed and nothing else (no class or function of
diffusers is rebound; :func:`restore_vae` undoes it):

* Every ``WanCausalConv3d`` / ``QwenImageCausalConv3d`` of stride 1 gets a subclass of its
  own class (``module.__class__`` is swapped, parameters and ``isinstance`` checks stay)
  whose forward calls :func:`fastpath.ops.conv3d.causal_conv3d`'s computation: the cached
  frames and the zero padding are folded into the convolution instead of ``torch.cat`` +
  ``F.pad`` copies of every activation; a single frame without a cache (an image) convolves
  with its one temporal tap. The encoder's strided temporal convolutions keep the stock forward.
* Every ``WanRMS_norm`` / ``QwenImageRMS_norm`` runs as one kernel
  (:func:`fastpath.ops.channel_norm.channel_rms_norm`: float32 inside, one rounding, where the
  stock forward makes a float32 copy and four more passes), with the SiLU that follows it
  fused where the module's forward is the known ``norm -> nonlinearity`` sequence (checked on
  its source; the module's ``nonlinearity`` then becomes ``nn.Identity``).
* The residual blocks (``WanResidualBlock`` / ``QwenImageResidualBlock``, where their forward's
  source is the known one) and the streamed decode's ``conv_in`` / ``conv_out`` write each
  convolution's new feature cache (the last two frames of its input) into the old cache's
  storage after the convolution, where the stock forward builds it beside the old one before:
  one layer's cache less at the peak. A first chunk's single frame is stored after a zero
  frame (the history the convolution pads with), so no cache grows in the second chunk. Where
  the convolutions and the norm are fastpath's and autograd does not record, the blocks run
  their convolutions without bias: the first's is added inside the second norm, the second's
  with the shortcut in one pass (:func:`fastpath.ops.residual.add_bias_residual`).
* ``WanUpsample`` / ``QwenImageUpsample`` in a nearest mode upsample in the input's dtype
  instead of a float32 round trip (nearest copies values: bit-identical, a 2x and a 4x
  float32 temporary fewer at the largest resolution).
* ``_decode`` writes each decoded chunk (unpatchified for Wan2.2, clamped) into one
  preallocated output instead of concatenating the growing video after every latent frame
  (the stock loop copies the whole video each step, and holds two copies at the end). An
  image (one latent frame) keeps no feature caches (no later chunk reads them). Video chunks
  run the decoder's frame-causal tail, everything after its last temporal upsampling, one
  output frame at a time (``stream``): the caches carry the history exactly as between
  chunks, and the largest activations exist for one frame instead of four. Where that last
  temporal upsampling ends a Wan2.1 / Qwen-Image up block, its 2-D part (nearest upsampling
  and a convolution per frame) runs in the per-frame tail too. Tiled decoding
  (``enable_tiling``) keeps the stock path.
* ``channels_last`` (default: on CUDA) runs the decoder's activations in channels-last-3d,
  the layout of cuDNN's NHWC convolution kernels (in NCDHW cuDNN transposes every call's input
  and output) and of the Triton kernel's contiguous channel vectors; each residual block takes
  its input back to channels-last where a stock block before it (attention, resampling)
  returned NCDHW, and the decoder's convolution weights are made channels-last once (cuDNN
  converts a contiguous filter on every call otherwise; :func:`restore_vae` converts back).
  The output is the stock contiguous layout.

``conv``: ``"auto"`` (default) and ``"torch"`` run the lean PyTorch path (``F.conv3d`` with the
spatial padding inside the convolution, only the history frames concatenated): on the H200
it ran at 1.03-1.31x of the stock pad + conv, where the Triton implicit-GEMM kernel ran at
0.41-0.56x of cuDNN. ``"taps"``: a streamed frame is convolved as one convolution per
temporal tap on the frames where they lie, summed (no concatenated window: less peak
memory, a little more time). ``"triton"`` forces the kernel wherever Triton runs (also
Triton's CPU interpreter). ``cudnn_benchmark=True`` lets cuDNN time its algorithms during
each decode (the flag is restored after; the first decode of a shape pays the search); the
default turns it on for float32 decodes on CUDA only.

Measured on the H200 with the defaults (docs/perf.md, "VAE decode"): Wan2.2 1.41-1.44x faster
than the stock decoder with 0.52x of its peak memory (float32 1.23-1.25x, 0.52x), Wan2.1
1.70-1.71x and 0.58x (float32 1.82-1.88x, 0.58x), a Qwen-Image image 2.49x and 0.27x.

Results equal the stock decoder up to summation order and rounding (float32: ~1e-6
relative with exact convolutions; bfloat16: the fused norms round once, so the output is
as close or closer to a float32 decode than the stock bfloat16 decoder's).
"""
from __future__ import annotations

import functools
import inspect
import itertools
import re
import types
from typing import Optional

import torch
import torch.nn.functional as F

from ..ops.channel_norm import channel_rms_norm
from ..ops.conv3d import _empty_like_layout, _is_channels_last, conv3d_forward, tap_sum_conv3d
from ..ops.residual import add_bias_residual

_LEAN: dict = {}  # diffusers class -> its fastpath subclass
_BASE: dict = {}  # fastpath subclass -> the diffusers class
CONV_CHOICES = ("auto", "triton", "torch", "taps")


def _use_kernel(mode: str, x: torch.Tensor, weight: torch.Tensor) -> Optional[bool]:
    if mode == "torch" or x.dtype != weight.dtype:
        return False
    if mode == "triton":
        return True  # the kernel wherever Triton serves x
    return False  # "auto": the lean PyTorch path, faster than the kernel on the H200 (see ops/conv3d.py)


def _conv_forward(self, x, cache_x=None, use_bias=True):
    """The stock ``CausalConv3d.forward(x, cache_x)`` without the padded copies (and, with
    ``use_bias`` False, without its bias: the caller adds it later, folded into its next op)."""
    pw, _, ph, _, pt, _ = self._padding
    cache = None
    if cache_x is not None and pt > 0:
        cache = cache_x.to(device=x.device, dtype=x.dtype)
    bias = self.bias if use_bias else None
    if getattr(self, "_fastpath_conv", "auto") == "taps" and not torch.is_grad_enabled():
        out = tap_sum_conv3d(x, self.weight, bias, (pt, ph, pw), cache)
        if out is not None:
            return out
    return conv3d_forward(x, self.weight, bias, (pt, ph, pw), cache,
                          _use_kernel(getattr(self, "_fastpath_conv", "auto"), x, self.weight))


def _upsample_forward(self, x):
    """Nearest upsampling in x's dtype (the stock forward goes through float32)."""
    if self.mode not in ("nearest", "nearest-exact"):
        return self._fastpath_base.forward(self, x)
    return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                         recompute_scale_factor=self.recompute_scale_factor)


def _norm_forward(self, x, input_bias=None):
    """The RMS_norm in one pass (:func:`fastpath.ops.channel_norm.channel_rms_norm`), with the
    SiLU that follows it fused where :func:`_fold_silu` folded the block's activation in, and
    ``input_bias`` (the bias of the convolution before, left out there) added to ``x`` first."""
    silu = getattr(self, "_fastpath_silu", False)
    bias = self.bias
    tensor_bias = isinstance(bias, torch.Tensor)
    if (not self.channel_first or self.gamma.dtype != x.dtype or (tensor_bias and bias.dtype != x.dtype)
            or (input_bias is not None and input_bias.dtype != x.dtype)
            or (torch.is_grad_enabled() and (x.requires_grad or self.gamma.requires_grad))):
        if input_bias is not None:
            x = x + input_bias.reshape((1, -1) + (1,) * (x.dim() - 2))
        out = self._fastpath_base.forward(self, x)
        return F.silu(out) if silu else out
    return channel_rms_norm(x, self.gamma, bias if tensor_bias else (float(bias) or None),
                            scale=self.scale, silu=silu, input_bias=input_bias)


#: Modules whose stock forward applies ``self.nonlinearity`` right after these norms, and
#: nowhere else: the SiLU moves into the norm kernel.
_SILU_AFTER = {"WanResidualBlock": ("norm1", "norm2"), "QwenImageResidualBlock": ("norm1", "norm2"),
               "WanDecoder3d": ("norm_out",), "QwenImageDecoder3d": ("norm_out",),
               "WanEncoder3d": ("norm_out",), "QwenImageEncoder3d": ("norm_out",)}


def _fold_silu(m, norm_cls) -> None:
    """Fuse ``m.nonlinearity`` into the norms before it (checked against the forward's source:
    a diffusers version with another structure keeps the stock activation)."""
    cls = _BASE.get(type(m), type(m))  # the stock class of a module optimize_vae swapped
    norms = _SILU_AFTER.get(cls.__name__)
    if not norms or type(getattr(m, "nonlinearity", None)) is not torch.nn.SiLU:
        return
    if not all(isinstance(getattr(m, n, None), norm_cls) for n in norms):
        return
    try:
        src = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return
    if src.count("self.nonlinearity(") != len(norms) or not all(
            re.search(rf"x = self\.{n}\(x\)\s*\n\s*x = self\.nonlinearity\(x\)", src) for n in norms):
        return
    for n in norms:
        getattr(m, n)._fastpath_silu = True
    object.__setattr__(m, "_fastpath_nonlinearity", m.nonlinearity)  # not a registered submodule
    m.nonlinearity = torch.nn.Identity()


def _lean_class(cls, forward):
    lean = _LEAN.get(cls)
    if lean is None:
        lean = type(f"Fastpath{cls.__name__}", (cls,),
                    {"forward": forward, "__module__": __name__, "_fastpath_base": cls})
        _LEAN[cls] = lean
        _BASE[lean] = cls
        globals()[lean.__name__] = lean  # importable by name (pickle)
    return lean


def _classes(vae):
    """(conv class, upsample class, norm class, residual block class, is_wan) of a supported VAE;
    TypeError otherwise."""
    try:
        from diffusers.models.autoencoders import autoencoder_kl_qwenimage as qw
        from diffusers.models.autoencoders import autoencoder_kl_wan as wan
    except ImportError as exc:
        raise TypeError(f"vae: optimize_vae needs diffusers' AutoencoderKLWan or AutoencoderKLQwenImage; "
                        f"diffusers is not importable ({exc})") from exc
    if isinstance(vae, wan.AutoencoderKLWan):
        return wan.WanCausalConv3d, wan.WanUpsample, wan.WanRMS_norm, wan.WanResidualBlock, True
    if isinstance(vae, qw.AutoencoderKLQwenImage):
        return (qw.QwenImageCausalConv3d, qw.QwenImageUpsample, qw.QwenImageRMS_norm, qw.QwenImageResidualBlock,
                False)
    raise TypeError(f"vae: expected diffusers' AutoencoderKLWan or AutoencoderKLQwenImage, "
                    f"got {type(vae).__name__}")


def _place(dst: torch.Tensor, piece: torch.Tensor, patch: Optional[int]) -> None:
    """Write ``clamp(unpatchify(piece), -1, 1)`` into ``dst`` (a frame slice of the output)."""
    if patch:
        b, cpp, f, h, w = piece.shape
        c = cpp // (patch * patch)
        src = piece.view(b, c, patch, patch, f, h, w).permute(0, 1, 4, 5, 3, 6, 2)
        dst = dst.view(b, c, f, h, patch, w, patch)
    else:
        src = piece
    torch.clamp(src, -1.0, 1.0, out=dst)


#: Up-block classes whose forward is known: resnets, then an optional resampler (and Wan2.2's
#: frame-duplicating shortcut); frame-causal unless they upsample in time.
_UP_BLOCKS = ("WanUpBlock", "WanResidualUpBlock", "QwenImageUpBlock")


def _tail_start(decoder) -> Optional[int]:
    """Index of the first up block after the last one that changes the frame count: from
    there on the decoder is frame-causal (causal convolutions with their caches, per-frame
    norms and 2-D resampling), so it can run one frame at a time. None: unknown structure."""
    need = ("conv_in", "mid_block", "up_blocks", "norm_out", "nonlinearity", "conv_out")
    if not all(hasattr(decoder, a) for a in need):
        return None
    last = -1
    for i, ub in enumerate(decoder.up_blocks):
        if type(ub).__name__ not in _UP_BLOCKS:
            return None
        ups = getattr(ub, "upsamplers", None)
        up = ups[0] if ups else getattr(ub, "upsampler", None)
        short = getattr(ub, "avg_shortcut", None)
        if (up is not None and getattr(up, "mode", None) != "upsample2d") or \
                (short is not None and getattr(short, "factor_t", 1) != 1):
            last = i
    return last + 1


def _roll_cache(conv, x, cache, idx):
    """``conv(x, cache[i])``, then ``cache[i]`` becomes the last two frames of ``[cache[i], x]``,
    as the stock decoders do (their conv_in, conv_out and residual blocks; a first chunk's single
    frame is stored after a zero frame, the history the convolution pads with). Where the old cache
    already holds two frames of x's shape (every step after the first chunk) and autograd does not
    record, the new frames are written into its storage after the convolution: the stock
    order builds the new cache first, so two caches of the layer coexist at its convolution."""
    i = idx[0]
    idx[0] += 1
    old = cache[i]
    out = conv(x, old)
    t = x.shape[2]
    if (isinstance(old, torch.Tensor) and old.shape[2] == 2 and old.shape[:2] == x.shape[:2]
            and old.shape[3:] == x.shape[3:] and old.dtype == x.dtype and old.device == x.device
            and not (torch.is_grad_enabled() and (x.requires_grad or old.requires_grad))):
        if t == 1:
            old[:, :, 0].copy_(old[:, :, 1])
            old[:, :, 1].copy_(x[:, :, 0])
        else:
            old.copy_(x[:, :, -2:])
        return out
    if old is None and t < 2:
        # The first chunk: the missing history frame is stored as the zeros the convolution
        # pads with, so the cache has its final two frames from here on and every later
        # update is in place (growing it in the second chunk held the old and new caches).
        new = _empty_like_layout(x, (*x.shape[:2], 2, *x.shape[3:])).zero_()
        new[:, :, 2 - t:].copy_(x)
        cache[i] = new
        return out
    new = x[:, :, -2:].clone()
    if new.shape[2] < 2 and old is not None:
        new = torch.cat([old[:, :, -1:].to(new.device), new], dim=2)
    cache[i] = new
    return out


def _resblock_forward(self, x, feat_cache=None, feat_idx=[0]):  # noqa: B006 - the stock signature
    """The stock residual block (norm, SiLU, causal convolution, twice, plus the shortcut) with
    its two caches rolled in place (:func:`_roll_cache`); in a channels-last decode its input is
    made channels-last first (the stock attention and resampling blocks return NCDHW). Where the
    modules allow (:func:`_bias_folds`), the convolutions run without their biases: the first's
    is added inside the second norm, the second's with the shortcut, in one pass each."""
    if self._fastpath_opts.get("cl_now") and not _is_channels_last(x):
        x = x.contiguous(memory_format=torch.channels_last_3d)  # a block before (attention) returned NCDHW
    fold = _bias_folds(self, x)
    h = self.conv_shortcut(x)
    x = self.nonlinearity(self.norm1(x))
    conv1 = functools.partial(self.conv1, use_bias=False) if fold else self.conv1
    x = conv1(x) if feat_cache is None else _roll_cache(conv1, x, feat_cache, feat_idx)
    x = self.norm2(x, input_bias=self.conv1.bias) if fold else self.norm2(x)
    x = self.dropout(self.nonlinearity(x))
    conv2 = functools.partial(self.conv2, use_bias=False) if fold else self.conv2
    x = conv2(x) if feat_cache is None else _roll_cache(conv2, x, feat_cache, feat_idx)
    return add_bias_residual(x, h, self.conv2.bias) if fold else x + h


def _bias_folds(block, x) -> bool:
    """Whether ``block``'s convolution biases can move into its second norm and its residual add:
    both convolutions and the norm are fastpath's, each convolution has a bias of x's dtype, the
    dropout is the identity (eval, or p = 0), and autograd does not record."""
    convs = (block.conv1, block.conv2)
    return (all(getattr(type(c), "forward", None) is _conv_forward and isinstance(c.bias, torch.Tensor)
                and c.bias.dtype == x.dtype for c in convs)
            and getattr(type(block.norm2), "forward", None) is _norm_forward
            and (not block.dropout.training or block.dropout.p == 0)
            and not (torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in block.parameters()))))


#: Statements the stock residual block's forward must contain for _resblock_forward to stand in
#: for it (checked on its source, as _fold_silu does: another structure keeps the stock forward).
_RESBLOCK_SOURCE = ("h = self.conv_shortcut(x)", "x = self.norm1(x)", "x = self.norm2(x)", "x = self.dropout(x)",
                    "x = self.conv1(x, feat_cache[idx])", "x = self.conv2(x, feat_cache[idx])",
                    "x = self.conv1(x)", "x = self.conv2(x)", "return x + h",
                    "cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), "
                    "cache_x], dim=2)")


def _known_resblock(cls) -> bool:
    """Whether ``cls.forward`` is the residual block :func:`_resblock_forward` reproduces (its two
    cache updates keep two frames: ``CACHE_T`` 2)."""
    try:
        src = " ".join(inspect.getsource(cls.forward).split())
    except (OSError, TypeError):
        return False
    mod = inspect.getmodule(cls)
    return (getattr(mod, "CACHE_T", None) == 2 and src.count("feat_cache[idx] = cache_x") == 2
            and src.count("self.nonlinearity(x)") == 2 and all(s in src for s in _RESBLOCK_SOURCE))


#: What :func:`_split_upsampler` checks in the stock sources: the up block's forward ends in its
#: upsampler, whose last step for ``upsample3d`` is the per-frame 2-D ``resample``.
_UPBLOCK_END = "if feat_cache is not None: x = self.upsamplers[0](x, feat_cache"
_UPBLOCK_LAST = "else: x = self.upsamplers[0](x) return x"
_RESAMPLE_SOURCE = ("x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)", "x = self.resample(x)",
                    "x = x.view(b, t, x.size(1), x.size(2), x.size(3)).permute(0, 2, 1, 3, 4)")


def _split_upsampler(block):
    """The temporal upsampler that ends ``block`` when its 2-D part (nearest upsampling and a
    convolution, per frame) can run inside the frame-by-frame tail: a Wan2.1 / Qwen-Image up
    block whose forward ends in an ``upsample3d`` resampler of the known source. None otherwise
    (Wan2.2's residual up block adds a shortcut after its upsampler)."""
    ups = getattr(block, "upsamplers", None)
    up = ups[0] if ups else None
    if (type(block).__name__ not in ("WanUpBlock", "QwenImageUpBlock") or up is None
            or getattr(up, "mode", None) != "upsample3d"
            or not isinstance(getattr(up, "resample", None), torch.nn.Module)):
        return None
    try:
        srcs = [" ".join(inspect.getsource(type(m).forward).split()) for m in (block, up)]
    except (OSError, TypeError):
        return None
    block_src, up_src = srcs
    if not (_UPBLOCK_END in block_src and block_src.endswith(_UPBLOCK_LAST)
            and all(s in up_src for s in _RESAMPLE_SOURCE) and up_src.endswith("return x")):
        return None
    return up


def _resample_frame(up, y):
    """``up``'s 2-D resampling of one frame ``y`` (B, C, 1, H, W), as its forward does per frame."""
    b, c, _, h, w = y.shape
    y = up.resample(y.permute(0, 2, 1, 3, 4).reshape(b, c, h, w))
    return y.view(b, 1, *y.shape[1:]).permute(0, 2, 1, 3, 4)


def _decode_chunk(decoder, x, cache, idx, extra, tail, split):
    """The decoder's forward on one latent chunk: whole up to the last frame-count change,
    then one frame at a time through the frame-causal rest (the caches carry the history
    exactly as between chunks), so the largest activations and their temporaries exist for
    one frame instead of the chunk's four. Where that change is an up block's last step
    (:func:`_split_upsampler`), its per-frame 2-D resampling moves into the per-frame rest too.
    ``split``: that up block's upsampler or None. Returns (output frames, generator of pieces); the
    generator must be exhausted before the next chunk starts (it updates the caches)."""
    x = _roll_cache(decoder.conv_in, x, cache, idx)
    x = decoder.mid_block(x, feat_cache=cache, feat_idx=idx)
    for ub in decoder.up_blocks[:tail]:
        if split is not None and ub is decoder.up_blocks[tail - 1]:
            resample = split.resample
            split.resample = torch.nn.Identity()  # the block returns its frames before the 2-D part
            try:
                x = ub(x, feat_cache=cache, feat_idx=idx, **extra)
            finally:
                split.resample = resample
        else:
            x = ub(x, feat_cache=cache, feat_idx=idx, **extra)

    def frames(x, start=idx[0]):
        for t in range(x.shape[2]):
            idx[0] = start
            y = x[:, :, t:t + 1]
            if split is not None:
                y = _resample_frame(split, y)
            for ub in decoder.up_blocks[tail:]:
                y = ub(y, feat_cache=cache, feat_idx=idx, **extra)
            y = decoder.nonlinearity(decoder.norm_out(y))
            yield _roll_cache(decoder.conv_out, y, cache, idx)
    return x.shape[2], frames(x)


def _chunks(self, x, num_frame, opts):
    """(output frames, pieces) of each latent frame, in order."""
    tail = _tail_start(self.decoder) if opts["stream"] else None
    split = _split_upsampler(self.decoder.up_blocks[tail - 1]) if tail else None  # once a decode: reads sources
    for i in range(num_frame):
        self._conv_idx = [0]
        extra = {"first_chunk": True} if (opts["wan"] and i == 0) else {}
        xi = x[:, :, i:i + 1]
        if num_frame == 1:  # an image: no later chunk reads the caches, so none are kept
            piece = self.decoder(xi, **extra)
        elif tail is None:
            piece = self.decoder(xi, feat_cache=self._feat_map, feat_idx=self._conv_idx, **extra)
        else:
            yield _decode_chunk(self.decoder, xi, self._feat_map, self._conv_idx, extra, tail, split)
            continue
        yield piece.shape[2], iter([piece])
        del piece


def cudnn_benchmark_for(vae, z: torch.Tensor) -> bool:
    """Whether ``vae`` (after :func:`optimize_vae`) decodes ``z`` with cuDNN's algorithm search on:
    its ``cudnn_benchmark`` option, or by default for float32 on CUDA."""
    option = vae._fastpath["cudnn_benchmark"]
    return (z.is_cuda and z.dtype == torch.float32) if option is None else bool(option)


def channels_last_for(vae, z: torch.Tensor) -> bool:
    """Whether ``vae`` (after :func:`optimize_vae`) decodes ``z`` in channels-last-3d: its
    ``channels_last`` option, or by default on CUDA."""
    option = vae._fastpath["channels_last"]
    return z.is_cuda if option is None else bool(option)


def _decode(self, z: torch.Tensor, return_dict: bool = True):
    """The stock ``_decode`` loop, writing every chunk into one preallocated output (an image
    keeps no caches; video chunks stream their frame-causal tail, see :func:`_decode_chunk`)."""
    from diffusers.models.autoencoders.vae import DecoderOutput

    _, _, num_frame, height, width = z.shape
    ratio = self.spatial_compression_ratio
    if self.use_tiling and (width > self.tile_sample_min_width // ratio
                            or height > self.tile_sample_min_height // ratio):
        return type(self)._decode(self, z, return_dict=return_dict)
    opts = self._fastpath
    channels_last = channels_last_for(self, z)
    patch = getattr(self.config, "patch_size", None)
    patch = patch if patch and patch > 1 else None
    self.clear_cache()
    x = self.post_quant_conv(z)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    bench_flag = torch.backends.cudnn.benchmark
    if cudnn_benchmark_for(self, z):
        torch.backends.cudnn.benchmark = True
    opts["cl_now"] = bool(channels_last)
    if channels_last:
        _weights_channels_last(self.decoder)
    try:
        out = _decode_frames(self, x, num_frame, opts, patch)
    finally:
        torch.backends.cudnn.benchmark = bench_flag
        opts["cl_now"] = False
    self.clear_cache()
    if not return_dict:
        return (out,)
    return DecoderOutput(sample=out)


def _weights_channels_last(decoder) -> None:
    """The decoder's convolution weights in channels-last (once, in place): with channels-last
    activations cuDNN wants its filters so too, and converts a contiguous one on every call
    (Wan2.2 float32: ~70 ms of a 2.4 s decode). Same values; only their strides change
    (:func:`restore_vae` changes them back)."""
    for m in decoder.modules():
        w = getattr(m, "weight", None)
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d)) and isinstance(w, torch.Tensor) and w.dim() in (4, 5):
            fmt = torch.channels_last if w.dim() == 4 else torch.channels_last_3d
            if not w.is_contiguous(memory_format=fmt):
                w.data = w.data.contiguous(memory_format=fmt)
                m._fastpath_weight_cl = True  # restore_vae makes it contiguous again


def _decode_frames(self, x, num_frame, opts, patch):
    """Every chunk's frames, clamped and unpatchified, in one preallocated output."""
    p = patch or 1
    out, held, f = None, [], 0
    for i, (n, pieces) in enumerate(_chunks(self, x, num_frame, opts)):
        if out is None and i == 0 and num_frame > 1:
            held = list(pieces)  # the first chunk's frames, until the second chunk's count is known
            continue
        if out is None:  # every later chunk is expected to be as long as this one
            total = sum(pc.shape[2] for pc in held) + n * (num_frame - i)
            pieces, held = itertools.chain(held, pieces), []
        for pc in pieces:
            if out is None:
                b, c, _, h, w = pc.shape
                out = torch.empty(b, c // (p * p), total, h * p, w * p, dtype=pc.dtype, device=pc.device)
            k = pc.shape[2]
            if f + k > out.shape[2]:  # more frames than foreseen: grow
                out = torch.cat([out, out.new_empty(*out.shape[:2], f + k - out.shape[2], *out.shape[3:])], 2)
            _place(out[:, :, f:f + k], pc, patch)
            f += k
            del pc
    return out[:, :, :f] if f < out.shape[2] else out


def optimize_vae(vae, *, conv: str = "auto", channels_last: Optional[bool] = None,
                 preallocate: bool = True, upsample: bool = True, stream: bool = True, norm: bool = True,
                 cudnn_benchmark: Optional[bool] = None):
    """Swap ``vae``'s causal convolutions (and nearest upsamplers, and its decode loop) to
    fastpath's lean versions, on this instance only. Returns ``vae``.

    Parameters
    ----------
    vae : diffusers ``AutoencoderKLWan`` or ``AutoencoderKLQwenImage``.
    conv : ``"auto"``, ``"triton"`` or ``"torch"`` (see the module docstring).
    channels_last : run the decoder in channels-last-3d (None: on CUDA). cuDNN's convolutions
        run NHWC: in NCDHW each call transposes its input and output (H200, Wan2.2: 1.16x ->
        1.37x of stock, 0.59x -> 0.53x memory).
    preallocate : replace the decode loop's growing concatenation by a preallocated output.
    upsample : upsample in the input dtype instead of float32 (bit-identical).
    norm : run each RMS_norm as one kernel (float32 inside, one rounding: within a bfloat16
        ulp of the stock result, closer to the exact value), with the SiLU after it fused.
    cudnn_benchmark : with ``preallocate``, turn ``torch.backends.cudnn.benchmark`` on for the
        duration of each decode (restored after; the first decode of a shape pays the search).
        None (default): on for float32 decodes on CUDA, where cuDNN's heuristic picks slower
        TF32 kernels (H200, Wan2.2 float32: 1.19x -> 1.25x of stock); off for 16-bit ones.
    stream : with ``preallocate``, run the decoder's frame-causal tail (everything after its
        last temporal upsampling) one output frame at a time (same results, a quarter of
        the largest activations alive).

    Raises
    ------
    TypeError for another model; ValueError for an unknown ``conv``.
    """
    conv_cls, up_cls, norm_cls, res_cls, is_wan = _classes(vae)
    if conv not in CONV_CHOICES:
        raise ValueError(f"conv: expected one of {', '.join(CONV_CHOICES)}, got {conv!r}")
    restore_vae(vae)  # a second call starts from the stock modules
    opts = {"conv": conv, "channels_last": channels_last, "wan": is_wan, "stream": stream,
            "cudnn_benchmark": cudnn_benchmark, "cl_now": False}
    for m in vae.modules():
        base = type(m)
        if issubclass(base, conv_cls) and tuple(m.stride) == (1, 1, 1) and tuple(m.dilation) == (1, 1, 1) \
                and m.groups == 1:
            m.__class__ = _lean_class(base, _conv_forward)
            m._fastpath_conv = conv
        elif upsample and issubclass(base, up_cls):
            m.__class__ = _lean_class(base, _upsample_forward)
        elif norm and issubclass(base, norm_cls):
            m.__class__ = _lean_class(base, _norm_forward)
        elif issubclass(base, res_cls) and _known_resblock(base):
            m.__class__ = _lean_class(base, _resblock_forward)
            m._fastpath_opts = opts
    if norm:
        for m in vae.modules():
            _fold_silu(m, norm_cls)
    vae._fastpath = opts
    if preallocate:
        vae._decode = types.MethodType(_decode, vae)
    elif "_decode" in vae.__dict__:
        del vae._decode
    return vae


def restore_vae(vae):
    """Undo :func:`optimize_vae` on ``vae`` (stock classes and decode loop). Returns ``vae``."""
    for m in vae.modules():
        if m.__dict__.pop("_fastpath_weight_cl", False):
            m.weight.data = m.weight.data.contiguous()
        base = _BASE.get(type(m))
        if base is not None:
            m.__class__ = base
            m.__dict__.pop("_fastpath_conv", None)
            m.__dict__.pop("_fastpath_silu", None)
            m.__dict__.pop("_fastpath_opts", None)
        if "_fastpath_nonlinearity" in m.__dict__:
            m.nonlinearity = m.__dict__.pop("_fastpath_nonlinearity")
    vae.__dict__.pop("_decode", None)
    vae.__dict__.pop("_fastpath", None)
    return vae
