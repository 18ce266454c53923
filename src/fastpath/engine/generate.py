"""Generation on a :class:`~fastpath.models.transformer.Transformer`: ``Engine.generate_step``
(token ids in, token ids out, one step at a time) -> :func:`stream_generate` (text pieces) ->
:func:`generate` (the whole text and its timings).

On a CUDA device the decode step (model, sampling, position update) is captured once per
batch size and sampling setting in a CUDA graph and replayed; the position and the last
token live on the device, so the host never waits for the GPU between tokens. Each step
also writes its token to a small device ring (slot = step number mod its length); the host
copies slots back to pinned buffers a few steps behind the GPU, for streaming and stop
tokens, on a side stream (``side_stream``) so that the copies never sit between two steps
on the compute stream. Elsewhere the same step runs eagerly.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Optional

import torch

from ..ops.sampling import check_params, sample
from .advance import advance
from ..models.transformer import Transformer


@dataclass
class SamplingParams:
    temperature: float = 0.0
    top_k: Optional[int] = None
    top_p: Optional[float] = None

    def __post_init__(self):
        check_params(self.temperature, self.top_k, self.top_p)

    def key(self) -> tuple:
        return (float(self.temperature), self.top_k, self.top_p)


@dataclass
class Stats:
    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    steps: int = 0

    @property
    def prefill_tps(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tps(self) -> float:
        """Decode tokens per second per sequence (steps after the first token / time)."""
        return self.steps / self.decode_s if self.decode_s else 0.0


class Engine:
    """A model with its static cache of ``batch`` rows of ``max_seq`` positions.

    ``graphs``: capture the decode step in a CUDA graph (default: on CUDA devices).
    ``lag``: how many steps the host lets the GPU run ahead before reading a token back.
    ``side_stream``: copy tokens back on a second CUDA stream (default: on CUDA devices).
    """

    def __init__(self, model: Transformer, *, max_seq: int = 2048, batch: int = 1,
                 graphs: Optional[bool] = None, lag: int = 4, side_stream: Optional[bool] = None):
        self.model, self.device = model, model.device
        cuda = self.device.type == "cuda"
        self.graphs = cuda if graphs is None else bool(graphs)
        self.side_stream = cuda if side_stream is None else bool(side_stream)
        for name, on in (("graphs", self.graphs), ("side_stream", self.side_stream)):
            if on and not cuda:
                raise ValueError(f"{name}: needs a CUDA model, this one is on {self.device}")
        model.setup_cache(batch, max_seq)
        self.batch, self.max_seq, self.lag = batch, max_seq, max(1, lag)
        self.tok = torch.zeros(batch, dtype=torch.int64, device=self.device)
        self.pos = torch.zeros(batch, dtype=torch.int64, device=self.device)
        self.kv_len = torch.ones(batch, dtype=torch.int32, device=self.device)  # pos + 1
        # step k's token goes to ring[k % len]: slots outlive the host's lag, so a slot is
        # copied back before a later step overwrites it
        self.ring = torch.zeros(self.lag + 2, batch, dtype=torch.int64, device=self.device)
        self.step_idx = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._graphs: dict = {}
        self.stats = Stats()

    # -- one decode step -------------------------------------------------------------
    def _step(self, B: int, sp: SamplingParams) -> None:
        """Decode one token per row into ``tok`` and ring slot ``step_idx``; advance ``pos``."""
        logits = self.model.decode(self.tok[:B], self.pos[:B], self.kv_len[:B])
        nxt = sample(logits, sp.temperature, sp.top_k, sp.top_p)
        advance(nxt, self.tok[:B], self.pos[:B], self.kv_len[:B], self.ring, self.step_idx)  # one launch

    def _graph_for(self, B: int, sp: SamplingParams):
        key = (B,) + sp.key()
        if key not in self._graphs:
            # the warm-up steps advance the cache and any recurrent/conv state in place: save
            # what they change and put it back after the capture
            tok0, pos0, kv0 = self.tok.clone(), self.pos.clone(), self.kv_len.clone()
            states = list(getattr(self.model, "state_tensors", list)())
            saved = [t.clone() for t in states]
            s = torch.cuda.Stream(self.device)
            s.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(s):
                for _ in range(2):  # compile the kernels and allocate workspaces outside the capture
                    self._step(B, sp)
            torch.cuda.current_stream(self.device).wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):  # its token goes to self.ring and self.tok
                self._step(B, sp)
            self.tok.copy_(tok0)
            self.pos.copy_(pos0)
            self.kv_len.copy_(kv0)
            for t, t0 in zip(states, saved):
                t.copy_(t0)
            self._graphs[key] = g
        return self._graphs[key]

    # -- prefill ---------------------------------------------------------------------
    def prefill(self, prompts: list, sp: SamplingParams, chunk: int = 512) -> torch.Tensor:
        """Fill the cache rows with ``prompts`` (lists of ids) in chunks of ``chunk`` tokens;
        returns the first sampled token of each row (device tensor (B,))."""
        logits = []
        for b, ids in enumerate(prompts):
            t = torch.tensor(ids, dtype=torch.int64, device=self.device)[None]
            for p0 in range(0, len(ids), chunk):
                out = self.model.prefill(t[:, p0:p0 + chunk], p0, rows=slice(b, b + 1))
            logits.append(out)
        first = sample(torch.cat(logits), sp.temperature, sp.top_k, sp.top_p)
        B = len(prompts)
        self.tok[:B].copy_(first)
        self.pos[:B].copy_(torch.tensor([len(p) for p in prompts], device=self.device))
        self.kv_len[:B].copy_(self.pos[:B] + 1)
        return first

    def _check(self, prompts: list, max_new_tokens: int) -> None:
        if not prompts or not all(isinstance(p, (list, tuple)) and len(p) > 0 for p in prompts):
            raise ValueError("prompts: expected a non-empty list of non-empty token-id lists")
        if len(prompts) > self.batch:
            raise ValueError(f"prompts: {len(prompts)} sequences, but the engine was built for batch {self.batch}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: expected >= 1, got {max_new_tokens}")
        longest = max(len(p) for p in prompts)
        if longest + max_new_tokens > self.max_seq:
            raise ValueError(f"max_new_tokens: prompt ({longest}) + {max_new_tokens} new tokens exceed the "
                             f"cache of {self.max_seq} positions (raise max_seq)")
        V = self.model.cfg.vocab_size
        bad = [t for p in prompts for t in p if not 0 <= int(t) < V]
        if bad:
            raise ValueError(f"prompts: token ids must be in [0, {V}), got {bad[:4]}")

    # -- the loop ----------------------------------------------------------------------
    def generate_step(self, prompts: list, max_new_tokens: int, sp: Optional[SamplingParams] = None,
                      stop_ids=(), chunk: int = 512) -> Iterator[list]:
        """Yield, step by step, the new token of every row (a list of B ints; a row that has
        produced a stop id yields None from then on). Stops after ``max_new_tokens`` or when
        every row has stopped. Timings go to ``self.stats``."""
        sp = sp or SamplingParams()
        self._check(prompts, max_new_tokens)
        B, stop = len(prompts), set(int(s) for s in stop_ids)
        cuda = self.device.type == "cuda"
        st = self.stats = Stats(prompt_tokens=sum(len(p) for p in prompts))
        t0 = time.perf_counter()
        first = self.prefill(prompts, sp, chunk).tolist()  # the one sync: the first token
        st.prefill_s = time.perf_counter() - t0
        done = [t in stop for t in first]
        st.new_tokens = B
        yield first
        if all(done) or max_new_tokens == 1:
            return
        graph = self._graph_for(B, sp) if self.graphs else None
        self.step_idx.zero_()
        ring, R = self.lag + 1, self.ring.shape[0]
        host = [torch.empty(B, dtype=torch.int64, device="cpu", pin_memory=cuda) for _ in range(ring)]
        events = [torch.cuda.Event() if cuda else None for _ in range(ring)]
        side = torch.cuda.Stream(self.device) if self.side_stream else None
        stepped = [torch.cuda.Event() for _ in range(ring)] if side is not None else None
        t1 = time.perf_counter()
        issued = read = 0
        n = max_new_tokens - 1
        while read < n:
            while issued < n and issued - read < self.lag:
                if graph is not None:
                    graph.replay()
                else:
                    self._step(B, sp)
                slot, i = self.ring[issued % R, :B], issued % ring
                if side is not None:  # the copy waits for this step on the side stream
                    stepped[i].record()
                    side.wait_event(stepped[i])
                    with torch.cuda.stream(side):
                        host[i].copy_(slot, non_blocking=True)
                        events[i].record(side)
                else:
                    host[i].copy_(slot, non_blocking=cuda)
                    if cuda:
                        events[i].record()
                issued += 1
            if cuda:
                events[read % ring].synchronize()
            toks = host[read % ring].tolist()
            read += 1
            st.steps = read
            row = []
            for b, t in enumerate(toks):
                row.append(None if done[b] else t)
                done[b] = done[b] or t in stop
            st.new_tokens += sum(t is not None for t in row)
            st.decode_s = time.perf_counter() - t1
            yield row
            if all(done):
                break
        if cuda:
            torch.cuda.synchronize(self.device)
        st.decode_s = time.perf_counter() - t1


def stream_generate(engine: Engine, tokenizer, prompt: str, max_new_tokens: int = 128,
                    sp: Optional[SamplingParams] = None, chat: bool = False, stop_ids=None,
                    template_vars: Optional[dict] = None) -> Iterator[str]:
    """Yield the text of one prompt piece by piece as tokens arrive (``chat``: in the chat
    template, with ``template_vars``)."""
    from .tokenizer import StreamDecoder

    ids = tokenizer.encode(prompt, chat=chat, **(template_vars or {}))
    stops = stop_ids if stop_ids is not None else default_stops(engine.model, tokenizer)
    dec = StreamDecoder(tokenizer)
    for row in engine.generate_step([ids], max_new_tokens, sp, stops):
        t = row[0]
        if t is None or t in stops:
            break
        piece = dec.add([t])
        if piece:
            yield piece


def generate(engine: Engine, tokenizer, prompt: str, max_new_tokens: int = 128,
             sp: Optional[SamplingParams] = None, chat: bool = False, template_vars: Optional[dict] = None) -> str:
    """The whole generated text of one prompt (timings in ``engine.stats``)."""
    return "".join(stream_generate(engine, tokenizer, prompt, max_new_tokens, sp, chat,
                                   template_vars=template_vars))


def default_stops(model: Transformer, tokenizer=None) -> list:
    stops = list(model.cfg.eos_token_ids)
    if tokenizer is not None:
        eos = tokenizer.token_id(tokenizer.eos)
        if eos is not None and eos not in stops:
            stops.append(eos)
    return stops
