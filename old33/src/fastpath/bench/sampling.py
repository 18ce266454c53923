"""sampling suite: fastpath.sample against the Hugging Face way (logits / T, torch.topk and
masked fill, softmax, sorted cumsum top-p mask, torch.multinomial); greedy against torch.argmax.

Greedy is ``fastpath.sample(logits, temperature=0.0)``. Sampled ids are random, so the check
is: integer ids, one per row, in range, and inside the top-k / top-p set the Hugging Face
warpers keep (top-p with a 1e-3 slack for rounding at the boundary); greedy ids equal argmax.
"""
from __future__ import annotations

import functools

from .harness import Case, randn_inputs


def hf_filter(logits, temperature=1.0, top_k=None, top_p=None):
    """Hugging Face's TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper."""
    import torch
    x = logits / temperature
    if top_k is not None:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None:
        sorted_x, idx = torch.sort(x, dim=-1, descending=False)
        remove = sorted_x.softmax(dim=-1).cumsum(dim=-1) <= (1 - top_p)
        remove[..., -1:] = False  # min_tokens_to_keep = 1
        x = x.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))
    return x


def hf_sample(logits, temperature=1.0, top_k=None, top_p=None):
    import torch
    probs = torch.softmax(hf_filter(logits, temperature, top_k, top_p), dim=-1)
    return torch.multinomial(probs, 1).squeeze(-1)


def _nbytes(shape, itemsize):
    return shape[0] * shape[1] * itemsize + shape[0] * 8  # read the logits, write int64 ids


def _check(temperature, top_k, top_p):
    def check(inputs, ids, native_ids):
        (logits,) = inputs
        rows, vocab = logits.shape
        if ids.dtype.is_floating_point or ids.numel() != rows:
            return False, f"expected {rows} integer ids, got {ids.dtype} {tuple(ids.shape)}"
        ids = ids.reshape(rows, 1).long()
        if not bool(((ids >= 0) & (ids < vocab)).all()):
            return False, f"ids out of range [0, {vocab})"
        if temperature == 0.0:
            eq = bool((ids.squeeze(1) == logits.argmax(dim=-1)).all())
            return eq, "greedy == argmax" if eq else "greedy != argmax"
        if top_k is None and top_p is None:
            return True, "ids in range"
        p = None if top_p is None else min(1.0, top_p + 1e-3)
        allowed = hf_filter(logits.float(), temperature, top_k, p) > float("-inf")
        inside = bool(allowed.gather(1, ids).all())
        return inside, "ids in the top-k/top-p set" if inside else "an id outside the top-k/top-p set"
    return check


def _case(name, shape, cpu_shape, temperature=1.0, top_k=None, top_p=None, **kw) -> Case:
    import torch

    import fastpath
    if temperature == 0.0:
        ours = lambda x: fastpath.sample(x, temperature=0.0)  # noqa: E731
        native = lambda x: torch.argmax(x, dim=-1)  # noqa: E731
    else:
        ours = lambda x: fastpath.sample(x, temperature=temperature, top_k=top_k, top_p=top_p)  # noqa: E731
        native = lambda x: hf_sample(x, temperature, top_k, top_p)  # noqa: E731
    return Case(suite="sampling", name=name, shape=shape, dtype="float32", ours=ours, native=native,
                check=_check(temperature, top_k, top_p), nbytes=_nbytes, cpu_shape=cpu_shape,
                make=functools.partial(randn_inputs, scale=3.0), **kw)  # a peaked, LM-like spread


def cases() -> list:
    v = 151936
    return [
        _case("top_k=50 top_p=0.9 T=0.7", (1, v), (1, 1000), 0.7, 50, 0.9,
              target=("us", 20.0), graphs=True, quick=True),
        _case("greedy", (1, v), (1, 1000), 0.0, graphs=True, quick=True),
        _case("temperature T=0.7", (1, v), (1, 1000), 0.7, graphs=True),
        _case("top_k=50 top_p=0.9", (64, v), (4, 500), 1.0, 50, 0.9, graphs=True),
    ]
