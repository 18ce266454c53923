"""Train the embedded default checkpoint of ``fastpath generate``: a tiny Qwen3-MoE (about 3M
parameters) and its byte-level BPE tokenizer, both trained on Python's own documentation
(``pydoc_data.topics``, part of every CPython install), saved in the Hugging Face layout.

    python scripts/train_default.py --out src/fastpath/data/default [--device cuda] [--steps 1500]

Uses transformers' own Qwen3-MoE implementation for training (independent of fastpath's
model code, which the tests then check against it). Deterministic for a given seed/device.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch


def corpus() -> str:
    from pydoc_data.topics import topics

    parts = [topics[k].strip() for k in sorted(topics)]
    return "\n\n".join(p for p in parts if p)


def train_tokenizer(text: str, vocab: int, out: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    chunks = text.split("\n\n")
    tok.train_from_iterator(chunks, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "bos_token": None, "add_bos_token": False, "model_max_length": 1024}, fh, indent=2)
    return tok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=None,
                    help="directory with tokenizer.json / tokenizer_config.json to reuse instead of training one")
    args = ap.parse_args(argv)
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    text = corpus()
    if args.tokenizer:
        import shutil
        from tokenizers import Tokenizer

        for f in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.abspath(args.tokenizer) != os.path.abspath(args.out):
                shutil.copy(os.path.join(args.tokenizer, f), os.path.join(args.out, f))
        tok = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    else:
        tok = train_tokenizer(text, 2048, args.out)
    eos = tok.token_to_id("<|endoftext|>")
    ids = []
    for chunk in text.split("\n\n"):
        ids.extend(tok.encode(chunk).ids + [eos])
    data = torch.tensor(ids, dtype=torch.int64)
    print(f"corpus: {len(text) / 1e6:.2f} MB of text, {len(ids)} tokens", flush=True)
    cfg = Qwen3MoeConfig(vocab_size=tok.get_vocab_size(), hidden_size=192, intermediate_size=512,
                         moe_intermediate_size=128, num_hidden_layers=4, num_attention_heads=6,
                         num_key_value_heads=2, head_dim=32, num_experts=8, num_experts_per_tok=2,
                         norm_topk_prob=True, decoder_sparse_step=1, max_position_embeddings=1024,
                         tie_word_embeddings=True, rope_theta=10000.0, eos_token_id=eos, bos_token_id=None,
                         pad_token_id=None, router_aux_loss_coef=0.01, output_router_logits=True)
    dev = torch.device(args.device)
    model = Qwen3MoeForCausalLM(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.05)
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.time()
    for step in range(args.steps):
        lr = 3e-3 * min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s:s + args.seq + 1] for s in starts.tolist()]).to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            out = model(input_ids=x[:, :-1])
            loss = torch.nn.functional.cross_entropy(out.logits.float().flatten(0, 1), x[:, 1:].flatten())
            if getattr(out, "aux_loss", None) is not None:
                loss = loss + cfg.router_aux_loss_coef * out.aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:5d} loss {loss.item():.3f} lr {lr:.2e} {time.time() - t0:.0f}s", flush=True)
    model.config.output_router_logits = False
    model.to(torch.bfloat16).save_pretrained(args.out)
    with open(os.path.join(args.out, "README.md"), "w") as fh:
        fh.write(f"Tiny Qwen3-MoE ({n_params / 1e6:.2f}M parameters) and BPE tokenizer trained by "
                 f"scripts/train_default.py ({args.steps} steps, seed {args.seed}, {args.device}) on "
                 "Python's pydoc topics. The embedded default of `fastpath generate`.\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
