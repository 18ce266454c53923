"""Load a Hugging Face checkpoint directory (``config.json`` + ``*.safetensors``, sharded with
``model.safetensors.index.json`` or not) into a :class:`~fastpath.models.transformer.Transformer`,
or into the model class of an architecture of :data:`~fastpath.models.config.ARCHITECTURES`.

The model's tensors are allocated once on the target device; each checkpoint tensor is
memory-mapped, copied straight into its slot (quantised to FP8 on the device on the way
when asked) and dropped: there are never two copies of the model. FP8 checkpoints are read
with their scales (:func:`_fp8_scale`): block scales (``weight_scale_inv``, 128x128 as
DeepSeek and Qwen3-FP8 store them, or ``weight_scale`` blocks), per-output-channel and
per-tensor scales (``weight_scale``: compressed-tensors "FP8-dynamic", fbgemm). A model loaded
with ``fp8=True`` keeps per-channel and per-tensor float8_e4m3fn weights exactly as stored
(its own format: one scale a row); block-scaled ones, and every FP8 weight of a model loaded
in a float dtype, are dequantised on the device as they load (then quantised per row for
``fp8=True``).
"""
from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
from typing import Optional

import torch

from .config import ModelConfig, architecture
from .safetensors import SafetensorsFile
from .transformer import Transformer

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_IGNORED = re.compile(r"(rotary_emb\.inv_freq|\.weight_scale_inv|\.weight_scale|\.input_scale)$")


class Progress:
    """One status line on stderr, rewritten at most every half second."""

    def __init__(self, total: int, what: str, stream=None):
        self.total, self.what, self.stream = max(total, 1), what, stream or sys.stderr
        self.done, self.t0, self.last = 0, time.perf_counter(), 0.0

    def add(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last > 0.5 or self.done >= self.total:
            self.last = now
            unit, div = ("GB", 1e9) if self.total >= 1e9 else ("MB", 1e6)
            rate = self.done / max(now - self.t0, 1e-9) / div
            self.stream.write(f"\r{self.what} {self.done / div:6.1f} / {self.total / div:.1f} {unit} "
                              f"({100 * self.done / self.total:3.0f}%, {rate:.1f} {unit}/s)")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()


def _files(path: str) -> list:
    if not os.path.isdir(path):
        raise FileNotFoundError(f"model: {path!r} is not a directory")
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as fh:
            names = sorted(set(json.load(fh)["weight_map"].values()))
        missing = [n for n in names if not os.path.isfile(os.path.join(path, n))]
        if missing:
            raise FileNotFoundError(f"model: shards listed in the index are missing: {', '.join(missing)}")
        return [os.path.join(path, n) for n in names]
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise FileNotFoundError(f"model: no *.safetensors in {path!r} (only safetensors checkpoints are read)")
    return files


class _Slot:
    """Where one checkpoint tensor goes: ``target[index]`` (rows of a fused tensor) with its
    FP8 scale rows ``scale[index]`` when the model is FP8."""

    def __init__(self, target: torch.Tensor, index=(), scale: Optional[torch.Tensor] = None):
        self.target, self.index, self.scale = target, index, scale

    def write_fp8(self, q: torch.Tensor, rows: torch.Tensor) -> None:
        """An FP8 weight with one scale a row, stored as it is (the slot must be FP8)."""
        dst = self.target[self.index] if self.index != () else self.target
        if tuple(dst.shape) != tuple(q.shape):
            raise ValueError(f"checkpoint tensor of shape {tuple(q.shape)} does not fit {tuple(dst.shape)}")
        dst.copy_(q)
        sdst = self.scale[self.index] if self.index != () else self.scale
        sdst.copy_(rows.view(sdst.shape))

    def write(self, w: torch.Tensor) -> None:
        dst = self.target[self.index] if self.index != () else self.target
        if tuple(dst.shape) != tuple(w.shape):
            raise ValueError(f"checkpoint tensor of shape {tuple(w.shape)} does not fit {tuple(dst.shape)}")
        if self.scale is None:
            dst.copy_(w)
            return
        from ..nn.fp8_linear import quantize_rowwise

        w2 = w.reshape(-1, w.shape[-1])
        q, s = quantize_rowwise(w2.to(self.target.device, torch.float32))
        dst.copy_(q.view(dst.shape))
        sdst = self.scale[self.index] if self.index != () else self.scale
        sdst.copy_(s.view(sdst.shape))


def linear_slot(lin, rows=()) -> _Slot:
    """Rows ``rows`` of a :class:`~fastpath.models.transformer.Linear`'s weight, with its FP8 scale."""
    return _Slot(lin.weight, rows, lin.scale)


def qkv_rows(nh: int, nkv: int, D: int) -> dict:
    """The q / k / v row ranges of a fused (q, k, v) projection."""
    return {"q": slice(0, nh * D), "k": slice(nh * D, (nh + nkv) * D), "v": slice((nh + nkv) * D, None)}


def head_slots(out: dict, model, norm: str) -> None:
    """The embedding, the final norm (checkpoint name ``norm``) and an untied LM head."""
    out["model.embed_tokens.weight"] = _Slot(model.embed)
    out[norm] = _Slot(model.norm)
    if model.lm_head is not None:
        out["lm_head.weight"] = linear_slot(model.lm_head)


def mlp_slots(out: dict, p: str, mlp, names=("gate_proj", "up_proj", "down_proj")) -> None:
    """A dense gated MLP (fused ``gate_up``, ``down``) under prefix ``p``."""
    I = mlp.gate_up.weight.shape[0] // 2
    out[p + f"{names[0]}.weight"] = linear_slot(mlp.gate_up, slice(0, I))
    out[p + f"{names[1]}.weight"] = linear_slot(mlp.gate_up, slice(I, None))
    out[p + f"{names[2]}.weight"] = linear_slot(mlp.down)


def moe_slots(out: dict, p: str, moe, names: dict) -> None:
    """Slots of a :class:`~fastpath.models.transformer.MoE` block under prefix ``p``
    (``.../mlp.``): the router, the fused transformers-5 stacks ``experts.gate_up_proj`` /
    ``experts.down_proj``, the per-expert ``experts.{e}.<name>.weight`` under every alias
    ``names`` gives for ``gate``, ``up`` and ``down`` (aliases share one slot), and the
    expert bias."""
    E, I = moe.E, moe.gate_up.shape[1] // 2
    out[p + "gate.weight"] = _Slot(moe.router, slice(0, E))
    out[p + "experts.gate_up_proj"] = _Slot(moe.gate_up, slice(0, E), moe.gate_up_scale)
    out[p + "experts.down_proj"] = _Slot(moe.down, slice(0, E), moe.down_scale)
    for e in range(E):
        parts = {"gate": _Slot(moe.gate_up, (e, slice(0, I)), moe.gate_up_scale),
                 "up": _Slot(moe.gate_up, (e, slice(I, 2 * I)), moe.gate_up_scale),
                 "down": _Slot(moe.down, (e,), moe.down_scale)}
        for part, slot in parts.items():
            for alias in names[part]:
                out[p + f"experts.{e}.{alias}.weight"] = slot
    if moe.expert_bias is not None:
        out[p + "expert_bias"] = _Slot(moe.expert_bias)


def _slots(model: Transformer) -> dict:
    """Checkpoint name -> slot, for every name a checkpoint of this architecture may hold."""
    cfg, out = model.cfg, {}
    nh, nkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    head_slots(out, model, "model.norm.weight")
    for i, L in enumerate(model.layers):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = _Slot(L.attn_norm)
        out[p + "post_attention_layernorm.weight"] = _Slot(L.mlp_norm)
        for n, r in qkv_rows(nh, nkv, D).items():
            out[p + f"self_attn.{n}_proj.weight"] = linear_slot(L.qkv, r)
            if L.qkv.bias is not None:
                out[p + f"self_attn.{n}_proj.bias"] = _Slot(L.qkv.bias, r)
        out[p + "self_attn.o_proj.weight"] = linear_slot(L.o)
        if cfg.qk_norm != "none":
            out[p + "self_attn.q_norm.weight"] = _Slot(L.q_norm)
            out[p + "self_attn.k_norm.weight"] = _Slot(L.k_norm)
        f = L.ffn
        if not L.moe:
            mlp_slots(out, p + "mlp.", f)
            continue
        moe_slots(out, p + ("block_sparse_moe." if cfg.model_type == "mixtral" else "mlp."), f,
                  {"gate": ("gate_proj", "w1"), "up": ("up_proj", "w3"), "down": ("down_proj", "w2")})
    return out


def _fp8_scale(q: torch.Tensor, s: torch.Tensor, name: str) -> torch.Tensor:
    """The checkpoint's dequantisation multipliers of FP8 weight ``q`` (N, K) as a 2-D grid of
    blocks: (1, 1) per tensor, (N, 1) per output channel, (ceil(N / bn), ceil(K / bk)) blocks."""
    n, k = q.shape
    if s.numel() == 1:
        return s.reshape(1, 1)
    if s.dim() == 1 and s.shape[0] == n:
        return s.reshape(n, 1)
    if s.dim() == 2 and 1 <= s.shape[0] <= n and 1 <= s.shape[1] <= k:
        return s
    raise ValueError(f"model: scale {name!r} of shape {tuple(s.shape)} fits no FP8 layout of a weight of shape "
                     f"{(n, k)} (per tensor, per row (N,) / (N, 1), or 2-D blocks)")


def _dequant_block(q: torch.Tensor, s: torch.Tensor, dtype) -> torch.Tensor:
    """``q * scale`` with one scale per (bn x bk) block (block size from the shapes)."""
    n, k = q.shape
    bn, bk = -(-n // s.shape[0]), -(-k // s.shape[1])
    full = s.float().repeat_interleave(bn, 0)[:n].repeat_interleave(bk, 1)[:, :k]
    return (q.float() * full).to(dtype)


def stores_fp8(path: str) -> bool:
    """Whether the checkpoint in ``path`` holds float8 weights (from the safetensors headers)."""
    f8 = {getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)} - {None}
    return any(h.info(n)[0] in f8 for h in (SafetensorsFile(f) for f in _files(path)) for n in h.keys())


def load(path: str, *, device="cuda", dtype=torch.bfloat16, fp8: bool = False, layers: Optional[int] = None,
         progress: bool = True, config: Optional[ModelConfig] = None) -> Transformer:
    """Build the model of ``path/config.json`` on ``device`` and fill it from the checkpoint.

    ``fp8=True`` quantises every projection to float8_e4m3fn with per-row scales as it loads
    (an FP8 checkpoint's per-row or per-tensor float8_e4m3fn weights are kept as stored);
    ``layers`` keeps only the first N layers (quick runs). Raises FileNotFoundError for a
    missing config or shard, NotImplementedError for an unsupported architecture, and
    ValueError naming the tensors the checkpoint lacks or holds in a wrong shape.
    """
    cfg = config or ModelConfig.from_dir(path)
    if layers is not None:
        cfg = cfg.with_layers(layers)
    files = _files(path)
    device = torch.device(device)
    check_fits(cfg, device, dtype, fp8)
    model = new_model(cfg, dtype=dtype, device=device, fp8=fp8)
    arch = architecture(cfg.model_type)
    slots = _slots(model) if arch is None else arch.checkpoint_slots(model)
    rename = (lambda n: n) if arch is None else arch.checkpoint_name
    handles = [SafetensorsFile(f) for f in files]
    # the model's name of each checkpoint tensor -> (file, name in the file); None: not the model's
    where = {rename(n): (h, n) for h in handles for n in h.keys() if rename(n) is not None}
    todo = [(n, h, orig) for n, (h, orig) in where.items() if n in slots]
    total = sum(h.get(o).numel() * h.info(o)[0].itemsize for _, h, o in todo)
    bar = Progress(total, f"loading {os.path.basename(os.path.normpath(path))}") if progress else None
    filled = set()
    for name, h, orig in todo:
        w = h.get(orig)
        slot = slots[name]
        try:
            if w.dtype in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
                sname = next((name[: -len("weight")] + suffix for suffix in ("weight_scale_inv", "weight_scale")
                              if name[: -len("weight")] + suffix in where), None)
                if sname is None or w.dim() != 2:
                    raise ValueError(f"FP8 tensor {orig!r} of shape {tuple(w.shape)} has no weight_scale_inv or "
                                     "weight_scale in the checkpoint")
                sh, so = where[sname]
                scale = _fp8_scale(w, sh.get(so), sname).to(device, torch.float32)
                w = w.to(device)
                if (slot.scale is not None and w.dtype == torch.float8_e4m3fn and scale.shape[1] == 1
                        and scale.shape[0] in (1, w.shape[0])):
                    slot.write_fp8(w, scale.expand(w.shape[0], 1))  # one scale a row: kept as stored
                else:
                    slot.write(_dequant_block(w, scale, dtype))
            else:
                slot.write(w.to(device, non_blocking=False) if slot.scale is None else w)
        except ValueError as e:
            raise ValueError(f"model: tensor {name!r}: {e}") from None
        filled.add(id(slots[name]))
        if bar:
            bar.add(h.get(orig).numel() * h.info(orig)[0].itemsize)
    unknown = [n for n in where if n not in slots and not _IGNORED.search(n) and not _skippable(n, cfg)]
    if unknown:
        raise ValueError(f"model: checkpoint tensors fastpath does not know: {', '.join(unknown[:8])}"
                         + (" ..." if len(unknown) > 8 else ""))
    complete = _complete_experts(slots, filled)
    missing = sorted(n for n, s in slots.items() if id(s) not in filled and n not in complete)
    if missing:
        raise ValueError(f"model: checkpoint lacks tensors: {', '.join(missing[:8])}"
                         + (" ..." if len(missing) > 8 else ""))
    return model


def new_model(cfg, *, dtype=torch.bfloat16, device="cpu", fp8: bool = False):
    """The (empty) model of ``cfg``: a :class:`Transformer`, or the class of its architecture
    in :data:`~fastpath.models.config.ARCHITECTURES`."""
    arch = architecture(cfg.model_type)
    cls = Transformer if arch is None else arch.Model
    return cls(cfg, dtype=dtype, device=device, fp8=fp8)


def _skippable(name: str, cfg: ModelConfig) -> bool:
    """Tensors of layers cut away with ``layers=``, or a tied LM head stored anyway."""
    m = _LAYER.match(name)
    if m:
        return int(m.group(1)) >= cfg.num_layers
    return name == "lm_head.weight" and cfg.tie_word_embeddings


def _complete_experts(slots: dict, filled: set) -> set:
    """Expert weights come either per expert (under Qwen or Mixtral names, which share slots)
    or as the fused transformers-5 stacks: the expert-slot names of every layer whose experts
    were filled one way or the other."""
    groups: dict = {}
    for n, s in slots.items():
        if ".experts." in n:
            prefix = n.split("experts.")[0] + "experts."
            fused = n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj")
            groups.setdefault(prefix, ([], [], []))[0 if fused else 1].append(s)
            groups[prefix][2].append(n)
    done = set()
    for fused, per, names in groups.values():
        if all(id(s) in filled for s in fused) or all(id(s) in filled for s in per):
            done.update(names)
    return done


def weight_bytes(cfg: ModelConfig, dtype, fp8: bool) -> int:
    """Bytes of the model's tensors on the device."""
    p = cfg.num_params()["total"]
    if not fp8:
        return p * dtype.itemsize
    small = cfg.vocab_size * cfg.hidden_size + 4 * cfg.hidden_size * cfg.num_layers  # embedding, norms
    return (p - small) + small * dtype.itemsize


def check_fits(cfg: ModelConfig, device: torch.device, dtype, fp8: bool) -> None:
    """MemoryError (with the sizes and a suggestion) when the model cannot fit on ``device``."""
    if device.type != "cuda":
        return
    free, total = torch.cuda.mem_get_info(device)
    need = weight_bytes(cfg, dtype, fp8)
    if need > free:
        hint = "" if fp8 else " Try --fp8 (FP8 weights need about half)."
        raise MemoryError(f"model: needs {need / 2**30:.1f} GiB on {device}, which has {free / 2**30:.1f} GiB free "
                          f"of {total / 2**30:.1f} GiB.{hint}")
