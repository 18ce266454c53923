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
  ``F.pad`` copies of every activation. The encoder's strided temporal convolutions keep
  the stock forward.
* ``WanUpsample`` / ``QwenImageUpsample`` in a nearest mode upsample in the input's dtype
  instead of a float32 round trip (nearest copies values: bit-identical, a 2x and a 4x
  float32 temporary fewer at the largest resolution).
* ``_decode`` writes each decoded chunk (unpatchified for Wan2.2, clamped) into one
  preallocated output instead of concatenating the growing video after every latent frame
  (the stock loop copies the whole video each step, and holds two copies at the end).
  Tiled decoding (``enable_tiling``) keeps the stock path.
* ``channels_last`` (default: on CUDA with ``conv="triton"``) runs the decoder's
  activations in channels-last-3d, the layout in which the convolution kernel reads
  contiguous, aligned channel vectors; the output is the stock contiguous layout.

``conv``: ``"auto"`` (default) and ``"torch"`` run the lean PyTorch path (``F.conv3d`` with the
spatial padding inside the convolution, only the history frames concatenated): on the H200
it ran at 1.03-1.31x of the stock pad + conv, where the Triton implicit-GEMM kernel ran at
0.41-0.56x of cuDNN. ``"triton"`` forces the kernel wherever Triton runs (also Triton's CPU
interpreter).

Results equal the stock decoder up to the summation order of the convolutions (float32:
~1e-6 relative; bfloat16: within bfloat16 rounding).
"""
from __future__ import annotations

import types
from typing import Optional

import torch
import torch.nn.functional as F

from ..ops.conv3d import conv3d_forward

_LEAN: dict = {}  # diffusers class -> its fastpath subclass
_BASE: dict = {}  # fastpath subclass -> the diffusers class
CONV_CHOICES = ("auto", "triton", "torch")


def _use_kernel(mode: str, x: torch.Tensor, weight: torch.Tensor) -> Optional[bool]:
    if mode == "torch" or x.dtype != weight.dtype:
        return False
    if mode == "triton":
        return True  # the kernel wherever Triton serves x
    return False  # "auto": the lean PyTorch path, faster than the kernel on the H200 (see ops/conv3d.py)


def _conv_forward(self, x, cache_x=None):
    """The stock ``CausalConv3d.forward(x, cache_x)`` without the padded copies."""
    pw, _, ph, _, pt, _ = self._padding
    cache = None
    if cache_x is not None and pt > 0:
        cache = cache_x.to(device=x.device, dtype=x.dtype)
    return conv3d_forward(x, self.weight, self.bias, (pt, ph, pw), cache,
                          _use_kernel(getattr(self, "_fastpath_conv", "auto"), x, self.weight))


def _upsample_forward(self, x):
    """Nearest upsampling in x's dtype (the stock forward goes through float32)."""
    if self.mode not in ("nearest", "nearest-exact"):
        return self._fastpath_base.forward(self, x)
    return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                         recompute_scale_factor=self.recompute_scale_factor)


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
    """(conv class, upsample class, is_wan) of a supported VAE; TypeError otherwise."""
    try:
        from diffusers.models.autoencoders import autoencoder_kl_qwenimage as qw
        from diffusers.models.autoencoders import autoencoder_kl_wan as wan
    except ImportError as exc:
        raise TypeError(f"vae: optimize_vae needs diffusers' AutoencoderKLWan or AutoencoderKLQwenImage; "
                        f"diffusers is not importable ({exc})") from exc
    if isinstance(vae, wan.AutoencoderKLWan):
        return wan.WanCausalConv3d, wan.WanUpsample, True
    if isinstance(vae, qw.AutoencoderKLQwenImage):
        return qw.QwenImageCausalConv3d, qw.QwenImageUpsample, False
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


def _decode(self, z: torch.Tensor, return_dict: bool = True):
    """The stock ``_decode`` loop, writing every chunk into one preallocated output."""
    from diffusers.models.autoencoders.vae import DecoderOutput

    _, _, num_frame, height, width = z.shape
    ratio = self.spatial_compression_ratio
    if self.use_tiling and (width > self.tile_sample_min_width // ratio
                            or height > self.tile_sample_min_height // ratio):
        return type(self)._decode(self, z, return_dict=return_dict)
    opts = self._fastpath
    channels_last = opts["channels_last"]
    if channels_last is None:
        channels_last = z.is_cuda and opts["conv"] == "triton"
    patch = getattr(self.config, "patch_size", None)
    patch = patch if patch and patch > 1 else None
    self.clear_cache()
    x = self.post_quant_conv(z)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    out, pending, f = None, [], 0
    for i in range(num_frame):
        self._conv_idx = [0]
        extra = {"first_chunk": True} if (opts["wan"] and i == 0) else {}
        piece = self.decoder(x[:, :, i:i + 1], feat_cache=self._feat_map, feat_idx=self._conv_idx, **extra)
        if out is None:  # allocate once the frame count of the later chunks is known (second chunk)
            pending.append(piece)
            if len(pending) < min(2, num_frame):
                continue
            total = pending[0].shape[2] + pending[-1].shape[2] * (num_frame - 1)
            b, c, _, h, w = piece.shape
            p = patch or 1
            out = torch.empty(b, c // (p * p), total, h * p, w * p, dtype=piece.dtype, device=piece.device)
        todo, pending = pending or [piece], []
        for pc in todo:
            n = pc.shape[2]
            if f + n > out.shape[2]:  # a chunk longer than the second one (not seen in practice): grow
                out = torch.cat([out, out.new_empty(*out.shape[:2], f + n - out.shape[2], *out.shape[3:])], 2)
            _place(out[:, :, f:f + n], pc, patch)
            f += n
        del piece, todo
    if f < out.shape[2]:
        out = out[:, :, :f]
    self.clear_cache()
    if not return_dict:
        return (out,)
    return DecoderOutput(sample=out)


def optimize_vae(vae, *, conv: str = "auto", channels_last: Optional[bool] = None,
                 preallocate: bool = True, upsample: bool = True):
    """Swap ``vae``'s causal convolutions (and nearest upsamplers, and its decode loop) to
    fastpath's lean versions, on this instance only. Returns ``vae``.

    Parameters
    ----------
    vae : diffusers ``AutoencoderKLWan`` or ``AutoencoderKLQwenImage``.
    conv : ``"auto"``, ``"triton"`` or ``"torch"`` (see the module docstring).
    channels_last : run the decoder in channels-last-3d (None: on CUDA unless conv="torch").
    preallocate : replace the decode loop's growing concatenation by a preallocated output.
    upsample : upsample in the input dtype instead of float32 (bit-identical).

    Raises
    ------
    TypeError for another model; ValueError for an unknown ``conv``.
    """
    conv_cls, up_cls, is_wan = _classes(vae)
    if conv not in CONV_CHOICES:
        raise ValueError(f"conv: expected one of {', '.join(CONV_CHOICES)}, got {conv!r}")
    for m in vae.modules():
        base = _BASE.get(type(m), type(m))
        if issubclass(base, conv_cls) and tuple(m.stride) == (1, 1, 1) and tuple(m.dilation) == (1, 1, 1) \
                and m.groups == 1:
            m.__class__ = _lean_class(base, _conv_forward)
            m._fastpath_conv = conv
        elif upsample and issubclass(base, up_cls):
            m.__class__ = _lean_class(base, _upsample_forward)
    vae._fastpath = {"conv": conv, "channels_last": channels_last, "wan": is_wan}
    if preallocate:
        vae._decode = types.MethodType(_decode, vae)
    elif "_decode" in vae.__dict__:
        del vae._decode
    return vae


def restore_vae(vae):
    """Undo :func:`optimize_vae` on ``vae`` (stock classes and decode loop). Returns ``vae``."""
    for m in vae.modules():
        base = _BASE.get(type(m))
        if base is not None:
            m.__class__ = base
            m.__dict__.pop("_fastpath_conv", None)
    vae.__dict__.pop("_decode", None)
    vae.__dict__.pop("_fastpath", None)
    return vae
