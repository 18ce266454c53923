"""``fastpath generate`` and ``fastpath bench-decode`` (argument parsing lives in ``cli.py``)."""
from __future__ import annotations

import json
import os
import shlex
import sys
import time

import torch

#: The embedded default checkpoint (scripts/train_default.py) and its prompt.
DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "default")
DEFAULT_PROMPT = "The for statement is used to"


def _device_dtype(args):
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda was asked for, but torch sees no CUDA GPU")
    if device.type == "cuda" and device.index is not None:
        if device.index >= torch.cuda.device_count():
            raise ValueError(f"device: {device} was asked for, but torch sees {torch.cuda.device_count()} CUDA GPU(s)")
        torch.cuda.set_device(device)  # (this process works on that GPU alone)
    dtype = getattr(torch, args.dtype) if args.dtype else (torch.float32 if device.type == "cpu" else torch.bfloat16)
    if args.fp8 and not hasattr(torch, "float8_e4m3fn"):
        raise NotImplementedError(f"--fp8: torch {torch.__version__} has no float8_e4m3fn")
    return device, dtype


def _fp8(args, path) -> bool:
    """--fp8 / --no-fp8, else FP8 exactly when the checkpoint stores float8 weights (said on stderr)."""
    if args.fp8 is not None:
        return args.fp8
    from ..models.loader import stores_fp8
    if path is None or not hasattr(torch, "float8_e4m3fn") or not stores_fp8(path):
        return False
    print("[FP8 checkpoint: its weights stay FP8 (per-row and per-tensor scales as stored, block scales "
          "re-quantised per row); --no-fp8 loads them dequantised]", file=sys.stderr)
    return True


def _model_dir(path: str) -> None:
    """A --model that is not a directory, said as such (not as its first missing file)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--model: {path!r} is not a directory (expected a Hugging Face checkpoint: "
                                "config.json, tokenizer.json and *.safetensors)")


def generate(args) -> int:
    from ..models.config import ModelConfig
    from ..models.loader import load
    from .generate import Engine, SamplingParams, stream_generate
    from .tokenizer import Tokenizer

    path = args.model or DEFAULT_MODEL
    prompt = args.prompt if args.prompt is not None else (DEFAULT_PROMPT if args.model is None else None)
    if prompt is None:
        raise ValueError("--prompt: give a prompt for --model")
    if args.max_new_tokens < 1:  # (the arguments' own checks before any file is read)
        raise ValueError(f"--max-new-tokens: expected >= 1, got {args.max_new_tokens}")
    sp = SamplingParams(args.temperature, args.top_k if args.temperature > 0 else None, args.top_p)
    device, dtype = _device_dtype(args)
    _model_dir(path)
    cfg = ModelConfig.from_dir(path)  # (an unsupported architecture is said before a missing tokenizer)
    tok = Tokenizer(path)
    fp8 = _fp8(args, path)
    template_vars = {"enable_thinking": False} if args.no_thinking else {}
    n_prompt = len(tok.encode(prompt, chat=args.chat, **template_vars))
    if n_prompt + args.max_new_tokens + 1 > cfg.max_position:  # (before loading any weight)
        if n_prompt + 1 >= cfg.max_position:
            raise ValueError(f"--prompt: {n_prompt} tokens, the model has {cfg.max_position} positions")
        raise ValueError(f"--max-new-tokens: at most {cfg.max_position - n_prompt - 1} after this prompt's "
                         f"{n_prompt} tokens (the model has {cfg.max_position} positions), got {args.max_new_tokens}")
    model = load(path, device=device, dtype=dtype, fp8=fp8, config=cfg)
    eng = Engine(model, max_seq=n_prompt + args.max_new_tokens + 1)
    torch.manual_seed(args.seed)
    if args.model is None:
        print(f"[embedded model: a 3M-parameter Qwen3-MoE trained on Python's docs, {path}]", file=sys.stderr)
    sys.stdout.write(prompt)
    for piece in stream_generate(eng, tok, prompt, args.max_new_tokens, sp, chat=args.chat,
                                 template_vars=template_vars):
        sys.stdout.write(piece)
        sys.stdout.flush()
    st = eng.stats
    # (a first run's prefill includes compiling kernels: its time, not only its rate, says so)
    print(f"\n\n[{st.new_tokens} tokens; prefill {st.prompt_tokens} tokens in {1e3 * st.prefill_s:.0f} ms "
          f"({st.prefill_tps:.0f} tok/s), "
          f"decode {st.decode_tps:.1f} tok/s; {device}, {str(dtype)[6:]}{', fp8 weights' if fp8 else ''}"
          f"{', CUDA graph' if eng.graphs else ''}]", file=sys.stderr)
    return 0


def command_line(args) -> str:
    """The command recorded with results: the arguments ``cli.main`` parsed (also when a script
    called it with its own list), shell-quoted."""
    return "fastpath " + shlex.join(getattr(args, "argv", sys.argv[1:]))


def bench_decode(args) -> int:
    from ..bench.harness import append_record, environment, measure_ceilings, results_path
    from ..models.config import NAMED, ModelConfig, named
    from ..models.loader import load
    from . import bench

    for name in ("batch", "prompt_len", "new_tokens", "layers"):  # (before any weight is built or read)
        v = getattr(args, name)
        if v is not None and v < 1:
            raise ValueError(f"--{name.replace('_', '-')}: expected >= 1, got {v}")
    device, dtype = _device_dtype(args)
    if args.config and not args.random_weights:
        raise ValueError("--config: named configs have no weights; add --random-weights")
    if args.random_weights and not args.config:
        raise ValueError("--random-weights: needs --config NAME")
    if args.model:
        _model_dir(args.model)
    fp8 = _fp8(args, args.model)
    if args.model:
        model = load(args.model, device=device, dtype=dtype, fp8=fp8, layers=args.layers)
        name, cfg_dict = os.path.basename(os.path.normpath(args.model)), None
        with open(os.path.join(args.model, "config.json")) as fh:
            cfg_dict = json.load(fh)
    else:
        cfg = named(args.config)
        cfg = cfg.with_layers(args.layers) if args.layers else cfg
        print(f"building {args.config} ({cfg.num_layers} layers) with random weights on {device} ...",
              file=sys.stderr, flush=True)
        model = bench.random_model(cfg, device=device, dtype=dtype, fp8=fp8)
        name, cfg_dict = args.config, NAMED[args.config]
    cuda = device.type == "cuda"
    env = environment(command_line(args)) if cuda else {"gpu": "cpu", "date": time.strftime("%Y-%m-%d")}
    ceil = measure_ceilings() if cuda else {}
    t0 = time.perf_counter()
    r = bench.run(model, prompt_len=args.prompt_len, new_tokens=args.new_tokens, batch=args.batch)
    bw = ceil.get("copy_gbps")
    rec = {"suite": "decode", "model": name, "fp8": fp8, "dtype": str(dtype)[6:], "layers": model.cfg.num_layers,
           **r, "copy_gbps": bw}
    if bw:
        rec["roofline_tps"] = bw * 1e9 / r["bytes_per_token"]
        rec["pct_roofline"] = 100 * r["decode_tps"] / rec["roofline_tps"]
    print(_line("fastpath", rec), flush=True)
    del model
    torch.cuda.empty_cache() if cuda else None
    rows = [rec]
    if args.hf:
        mcfg = ModelConfig.from_hf(cfg_dict)
        impls = [None, bench.HF_BEST_EXPERTS.get(mcfg.model_type, "grouped_mm")] if mcfg.is_moe else [None]
        for impl in impls:
            h = bench.hf_baseline(cfg_dict, layers=args.layers, prompt_len=args.prompt_len,
                                  new_tokens=min(args.new_tokens, 32), experts=impl, device=device)
            hr = {"suite": "decode", "model": name, "dtype": "bfloat16", "layers": args.layers or mcfg.num_layers,
                  "engine": f"transformers eager ({h['experts']} experts)" if mcfg.is_moe else "transformers eager",
                  **h, "ratio": rec["decode_tps"] / h["decode_tps"]}
            print(_line(hr["engine"], hr), flush=True)
            rows.append(hr)
    if cuda or args.json:  # (CPU rows only where --json asks: bench/results holds GPU runs)
        path = results_path(env, args.json)
        for row in rows:
            row.setdefault("engine", "fastpath")
            append_record(path, {**env, **row})
        print(f"recorded in {path} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0



def _line(who: str, r: dict) -> str:
    s = (f"{who:38s} prefill {r['prefill_tps']:8.0f} tok/s  decode {r['decode_tps']:7.1f} tok/s")
    if "bytes_per_token" in r:
        s += f"  {r['bytes_per_token'] / 1e9:.2f} GB/token"
    if "pct_roofline" in r:
        s += f"  {r['pct_roofline']:.0f}% of roofline ({r['roofline_tps']:.0f} tok/s at {r['copy_gbps']:.0f} GB/s)"
    if "ratio" in r:
        s += f"  fastpath is {r['ratio']:.1f}x"
    return s
