"""``fastpath bench-decode``: prefill and decode throughput of the engine on a checkpoint or
on random weights with a named model's real shapes, the bytes each token must read, the
fraction of the bandwidth roofline, and (``--hf``) the same model in transformers, eager, in
the same run. One JSON line per measurement under ``bench/results/``."""
from __future__ import annotations

import gc
import statistics
import time
from typing import Optional

import torch

from ..models.config import ModelConfig
from ..models.transformer import Transformer
from .generate import Engine, SamplingParams


def random_model(cfg: ModelConfig, *, device, dtype=torch.bfloat16, fp8: bool = False, seed: int = 0,
                 progress: bool = True) -> Transformer:
    """The model with random weights (std 0.02, norms 1), filled tensor by tensor on the device
    (``progress``: a status line on stderr, as loading a checkpoint has: tens of GB take
    minutes on a CPU)."""
    from ..models.loader import Progress, check_fits, new_model

    device = torch.device(device)
    check_fits(cfg, device, dtype, fp8)
    model = new_model(cfg, dtype=dtype, device=device, fp8=fp8)
    gen = torch.Generator(device).manual_seed(seed)
    bufs = [(name, buf) for name, buf in model.named_buffers() if name != "inv_freq"]
    bar = Progress(sum(b.numel() * b.element_size() for _, b in bufs), "random weights") if progress else None
    for name, buf in bufs:
        if "norm" in name:
            buf.fill_(1.0)
        elif "scale" in name:
            buf.fill_(0.02 / 64)
        elif buf.dtype == torch.float8_e4m3fn:
            for chunk in buf.view(-1, buf.shape[-1]).split(4096):
                chunk.copy_(torch.randn(chunk.shape, device=device, generator=gen, dtype=dtype) * 64)
        else:
            buf.normal_(0.0, 0.02, generator=gen)
        if bar is not None:
            bar.add(buf.numel() * buf.element_size())
    return model


def bytes_per_token(model: Transformer, context: float) -> int:
    """Bytes one decode step must read: the active weights (top-k experts only) and the KV
    cache at ``context`` positions."""
    cfg = model.cfg
    p = cfg.num_params()["active"]
    small = cfg.hidden_size * (4 * cfg.num_layers + 2)  # norms and the embedding row
    wbytes = (p - small) * (1 if model.fp8 else model.dtype.itemsize) + small * model.dtype.itemsize
    if model.fp8:  # per-row scales of the active rows
        wbytes += 4 * (p - small) // cfg.hidden_size
    kv = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * model.dtype.itemsize * context
    return int(wbytes + kv)


def run(model: Transformer, *, prompt_len: int = 512, new_tokens: int = 256, batch: int = 1,
        graphs: Optional[bool] = None, seed: int = 0, side_stream: Optional[bool] = None,
        repeats: int = 3) -> dict:
    """Prefill ``batch`` random prompts of ``prompt_len`` tokens and decode ``new_tokens`` greedily
    (no stop token), once to compile and capture, then ``repeats`` times timed; returns the
    median prefill and decode rates of the timed runs (a single prefill's time moved by +-30%
    between processes on the H200: host time)."""
    eng = Engine(model, max_seq=prompt_len + new_tokens + 8, batch=batch, graphs=graphs,
                 side_stream=side_stream)
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(0, model.cfg.vocab_size, (batch, prompt_len), generator=g, device="cpu").tolist()
    prefill_s, decode_tps = [], []
    for i in range(1 + max(1, repeats)):
        n = sum(1 for _ in eng.generate_step(prompts, new_tokens, SamplingParams(0.0)))
        assert n == new_tokens
        if i:
            prefill_s.append(eng.stats.prefill_s)
            decode_tps.append(eng.stats.decode_tps)
    tps = statistics.median(decode_tps)
    return {"batch": batch, "prompt_tokens": prompt_len, "new_tokens": new_tokens,
            "prefill_tps": batch * prompt_len / statistics.median(prefill_s), "decode_tps": tps,
            "decode_tps_total": batch * tps, "graphs": eng.graphs, "timed_runs": len(prefill_s),
            "bytes_per_token": bytes_per_token(model, prompt_len + new_tokens / 2)}


#: transformers' fastest experts implementation per architecture on the H200 (the issues'
#: own measurements: Qwen3-30B-A3B 14.2 tok/s with grouped_mm against 12.5 batched_mm; LFM2.5
#: 38.8 with batched_mm against 17.1 by default; Qwen3.6 7.8 either way). --hf runs the
#: default and this one.
HF_BEST_EXPERTS = {"qwen3_5_moe": "batched_mm", "qwen3_5_moe_text": "batched_mm", "lfm2_moe": "batched_mm"}


class _Stamps:
    """A transformers streamer that only notes when each ``put`` arrives (the prompt, then
    every new token; generate has already copied the token to the host, so the GPU is done)."""

    def __init__(self):
        self.t: list = []

    def put(self, value) -> None:
        self.t.append(time.perf_counter())

    def end(self) -> None:
        pass


def hf_baseline(cfg_dict: dict, *, layers: Optional[int], prompt_len: int, new_tokens: int,
                experts: Optional[str] = None, device="cuda", seed: int = 0) -> dict:
    """transformers' own model of the same shapes, random weights, bf16, eager, dynamic cache:
    prefill time from a 1-token generate; decode tok/s from a ``new_tokens`` generate, between
    its first and last token (a streamer notes when each token arrives: no difference of two
    runs, which noise could make negative)."""
    import transformers

    kw = dict(cfg_dict.get("text_config") or cfg_dict)  # the text model of a multimodal checkpoint
    mt, theta = kw.pop("model_type"), kw.pop("rope_theta", 10000.0)
    mt = {"qwen3_5_moe": "qwen3_5_moe_text"}.get(mt, mt)  # the text model of a multimodal type
    rope = kw.pop("rope_parameters", None) or {"rope_type": "default", "rope_theta": theta}
    if layers:
        kw["num_hidden_layers"] = layers
        if "layer_types" in kw:
            kw["layer_types"] = kw["layer_types"][:layers]
    try:  # transformers 5 takes rope_parameters; some 5.x releases still take rope_theta
        cfg_cls = transformers.AutoConfig.for_model(mt, **kw, rope_parameters=rope)
    except TypeError:
        cfg_cls = transformers.AutoConfig.for_model(mt, **kw, rope_theta=rope["rope_theta"])
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg_cls, dtype=torch.bfloat16).eval()
    model.generation_config.eos_token_id = None  # every run makes all its tokens
    if experts:
        model.set_experts_implementation(experts)
    ids = torch.randint(0, cfg_cls.vocab_size, (1, prompt_len), device=device)
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, pad_token_id=0)

    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)

    def timed(n, streamer=None):
        sync()
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, streamer=streamer, **kw)
        sync()
        return time.perf_counter() - t

    timed(2)
    t1, stamps = timed(1), _Stamps()
    timed(new_tokens, stamps)
    if len(stamps.t) != new_tokens + 1:  # the prompt, then each new token
        raise RuntimeError(f"transformers' generate streamed {len(stamps.t)} times, expected {new_tokens + 1}")
    decode_s = stamps.t[-1] - stamps.t[1]
    out = {"prefill_tps": prompt_len / t1,
           "decode_tps": (new_tokens - 1) / decode_s if new_tokens > 1 and decode_s > 0 else float("nan"),
           "experts": experts or "default", "new_tokens": new_tokens}
    model = None
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out
