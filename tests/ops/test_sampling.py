"""fastpath.sample: greedy against torch.argmax, the sampled distribution against the exact
target distribution computed independently in float64, kernel against reference with the
same random numbers, reproducibility, errors, torch.compile."""
import math

import pytest
import torch

import fastpath
from fastpath.ops import sampling
from fastpath._core import backend, launch
from tests.conftest import AWKWARD, noncontig, randn

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _gen(device, seed):
    return torch.Generator(device=device).manual_seed(seed)


def _target(row: torch.Tensor, temperature: float, top_k=None, top_p=None) -> torch.Tensor:
    """The exact sampling distribution (HF semantics) over the vocabulary, in float64."""
    x = row.double().cpu() / temperature
    V = x.numel()
    order = torch.argsort(x, descending=True, stable=True)
    v = x[order]
    k = V if top_k is None else min(top_k, V)
    p = torch.softmax(v[:k], 0)
    if top_p is not None:
        excl = torch.cumsum(p, 0) - p
        keep = excl < top_p
        keep[0] = True
        p = p * keep
    out = torch.zeros(V, dtype=torch.float64)
    out[order[:k]] = p / p.sum()
    return out


def _chi2_bound(df: int, z: float = 4.75) -> float:
    """Wilson-Hilferty upper quantile of chi-square(df) at about 1e-6 tail probability."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def _assert_distribution(tokens: torch.Tensor, p: torch.Tensor):
    """Tokens outside the support never appear; a chi-square test on the support (bins with
    fewer than 5 expected draws pooled) fails a correct sampler with probability ~1e-6."""
    n = tokens.numel()
    counts = torch.bincount(tokens.cpu(), minlength=p.numel()).double()
    assert counts.numel() == p.numel(), "token id out of range"
    outside = counts[p == 0].sum().item()
    assert outside == 0, f"{outside:.0f} draws of tokens with probability 0"
    expected = n * p
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big & (p > 0)].sum().view(1)])
    exp = torch.cat([expected[big], expected[~big & (p > 0)].sum().view(1)])
    obs, exp = obs[exp > 0], exp[exp > 0]
    stat = ((obs - exp) ** 2 / exp).sum().item()
    df = max(obs.numel() - 1, 1)
    assert stat < _chi2_bound(df), f"chi-square {stat:.1f} over bound {_chi2_bound(df):.1f} (df {df})"


def _midpoint_top_p(row, temperature, top_k, keep):
    """A top_p halfway between two cumulative masses, so that exactly `keep` tokens are kept
    and no float rounding can move the boundary."""
    v = torch.sort(row.double() / temperature, descending=True).values[:top_k]
    c = torch.cumsum(torch.softmax(v, 0), 0)  # token i is kept iff c[i - 1] < top_p
    return float((c[keep - 2] + c[keep - 1]) / 2)


# ------------------------------------------------------------------ greedy


@pytest.mark.parametrize("V", AWKWARD)
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_greedy_matches_argmax(device, V, B, dtype):
    x = randn(B, V, dtype=dtype, device=device, scale=3.0)
    ref = x.float().argmax(-1)
    assert torch.equal(fastpath.sample(x, temperature=0.0), ref)
    assert torch.equal(fastpath.sample(noncontig(x), temperature=0.0), ref)
    assert torch.equal(fastpath.sample(x, temperature=0.9, top_k=1), ref)  # top-1 is greedy


def test_greedy_ties_and_masked(device):
    x = randn(3, 1000, device=device)
    x[:, 500:] = -float("inf")
    x[0, [3, 200, 999]] = 50.0  # ties: first index, like torch.argmax
    x[1, 700] = 60.0
    x[2, [150, 151]] = 40.0
    assert fastpath.sample(x, temperature=0.0).tolist() == [3, 700, 150]


# ------------------------------------------------------------------ distribution


STAT_CASES = [  # (temperature, top_k, keep tokens by top_p or None)
    (0.7, None, None),
    (1.3, 7, None),
    (1.0, None, 6),
    (0.5, 20, 4),
    (2.0, 1000, None),  # top_k > V is clamped: plain temperature sampling
]


@pytest.mark.parametrize("max_chunk", [None, 16], ids=["one_chunk", "split"])
@pytest.mark.parametrize("temperature,top_k,keep", STAT_CASES)
def test_distribution_matches_target(device, monkeypatch, temperature, top_k, keep, max_chunk):
    if max_chunk is not None:  # several programs per row, merged by the last one
        monkeypatch.setattr(sampling, "MAX_CHUNK", max_chunk)
    if backend.INTERPRET:  # blocks of 512 to 4096 rows, still several (the last partial): fewer programs
        monkeypatch.setattr(sampling, "BLOCK_ELEMS", 1 << 16)
    V = 67
    gumbel = keep is None and (top_k or V) >= V  # temperature only: the cheap Gumbel path
    N = 12000 if gumbel else 3000
    row = randn(V, device=device, scale=1.5)
    row[[5, 40]] = -float("inf")  # masked vocabulary entries are never drawn
    top_p = None if keep is None else _midpoint_top_p(row, temperature, top_k or V, keep)
    tokens = fastpath.sample(row.expand(N, V), temperature=temperature, top_k=top_k, top_p=top_p,
                             generator=_gen(device, 7))
    assert tokens.shape == (N,) and tokens.dtype == torch.int64
    _assert_distribution(tokens, _target(row, temperature, top_k, top_p))


@pytest.mark.parametrize("temperature,top_k,keep", STAT_CASES + [(0.8, None, 30)])
def test_reference_distribution_matches_target(device, temperature, top_k, keep):
    V, N = 1000, 20000
    row = randn(V, device=device, scale=2.0)
    top_p = None if keep is None else _midpoint_top_p(row, temperature, top_k or V, keep)
    tokens = fastpath.reference_sample(row.expand(N, V), temperature=temperature, top_k=top_k,
                                       top_p=top_p, generator=_gen(device, 3))
    _assert_distribution(tokens, _target(row, temperature, top_k, top_p))


def test_distribution_half_precision(device):
    V, N = 13, 3000
    row = randn(V, dtype=torch.bfloat16, device=device, scale=2.0)
    tokens = fastpath.sample(row.expand(N, V), temperature=0.9, top_k=5, generator=_gen(device, 1))
    _assert_distribution(tokens, _target(row.float(), 0.9, 5))


# ------------------------------------------------------------------ kernel vs reference


@pytest.mark.parametrize("V", [67, 1000])
@pytest.mark.parametrize("layout", ["random", "ascending", "descending"])
@pytest.mark.parametrize("kw", [dict(top_k=5), dict(top_k=17, top_p=0.6, temperature=0.8),
                                dict(top_k=200, top_p=0.9, temperature=3.0), dict(top_p=0.7)])
def test_kernel_matches_reference(device, V, layout, kw):
    """With top-k / top-p both paths turn the same random numbers into a token by inverse CDF,
    so they agree token for token (float32 data with no ties)."""
    x = randn(8, V, device=device, scale=2.0)
    if layout != "random":
        x = x.sort(-1, descending=layout == "descending").values  # the top tokens in one chunk
    out = fastpath.sample(noncontig(x), generator=_gen(device, 11), **kw)
    ref = fastpath.reference_sample(x, generator=_gen(device, 11), **kw)
    assert torch.equal(out, ref)
    for (_, _, name), buf in launch._workspaces.items():  # the last program re-zeroes its counter
        if name == "sample.counters":
            assert not buf.any()


def test_large_top_k_and_top_p_only_fall_back(device):
    x = randn(3, 1000, device=device)
    for kw in [dict(top_k=300), dict(top_p=0.5)]:  # the reference path on the same device
        out = fastpath.sample(x, generator=_gen(device, 2), **kw)
        assert torch.equal(out, fastpath.reference_sample(x, generator=_gen(device, 2), **kw))
    allowed = x.topk(300, -1).indices
    assert (allowed == fastpath.sample(x, top_k=300).unsqueeze(-1)).any(-1).all()


@pytest.mark.parametrize("top_k", [8, 269, None])  # the kernel; the reference path (k > 256, top-p alone)
def test_tie_across_top_p_keeps_the_lower_column(device, top_k):
    """Two equal maxima, each with more mass than top_p: only the first in descending order is kept,
    the lower column (the kernel's key order), on every path; torch.topk's order of ties is unspecified
    and once kept the other one."""
    x = torch.full((2, 600), -4.0, device=device)
    x[:, 517] = x[:, 211] = 6.0
    for seed in range(6):
        out = fastpath.sample(x, 0.7, top_k, 0.3, generator=_gen(device, seed))
        assert out.tolist() == [211, 211]


def test_float64_takes_reference_path(device):
    x = randn(3, 67, device=device).double()
    assert torch.equal(fastpath.sample(x, temperature=0.0), x.argmax(-1))
    out = fastpath.sample(x, top_k=4, generator=_gen(device, 5))
    assert torch.equal(out, fastpath.reference_sample(x, top_k=4, generator=_gen(device, 5)))


# ------------------------------------------------------------------ randomness, API


@pytest.mark.parametrize("kw", [dict(), dict(top_k=10, top_p=0.9)])
def test_generator_reproducibility(device, kw):
    x = randn(64, 67, device=device)
    a = fastpath.sample(x, generator=_gen(device, 123), **kw)
    b = fastpath.sample(x, generator=_gen(device, 123), **kw)
    c = fastpath.sample(x, generator=_gen(device, 124), **kw)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    torch.manual_seed(5)
    d = fastpath.sample(x, **kw)
    torch.manual_seed(5)
    assert torch.equal(d, fastpath.sample(x, **kw))


def test_top_k_above_vocabulary_is_clamped(device):
    x = randn(4, 13, device=device)
    a = fastpath.sample(x, top_k=100, top_p=0.5, generator=_gen(device, 9))
    assert torch.equal(a, fastpath.sample(x, top_k=13, top_p=0.5, generator=_gen(device, 9)))


def test_shapes_dtype_device(device):
    x = randn(7, device=device)
    out = fastpath.sample(x, top_k=3)
    assert out.shape == () and out.dtype == torch.int64 and out.device == x.device
    assert 0 <= int(out) < 7
    assert fastpath.sample(x, temperature=0.0).item() == int(x.argmax())
    assert fastpath.sample(randn(0, 5, device=device)).shape == (0,)
    assert fastpath.sample(randn(1, 1, device=device), top_k=5, top_p=0.3).tolist() == [0]


@pytest.mark.parametrize("args,exc,name", [
    (([1.0, 2.0],), TypeError, "logits"),
    ((torch.ones(3, dtype=torch.int64),), TypeError, "logits"),
    ((torch.ones(2, 3, 4),), ValueError, "logits"),
    ((torch.ones(2, 0),), ValueError, "logits"),
    ((torch.ones(3), -0.5), ValueError, "temperature"),
    ((torch.ones(3), float("nan")), ValueError, "temperature"),
    ((torch.ones(3), float("inf")), ValueError, "temperature"),
    ((torch.ones(3), 1.0, 0), ValueError, "top_k"),
    ((torch.ones(3), 1.0, 2.5), ValueError, "top_k"),
    ((torch.ones(3), 1.0, True), ValueError, "top_k"),
    ((torch.ones(3), 1.0, None, 0.0), ValueError, "top_p"),
    ((torch.ones(3), 1.0, None, 1.5), ValueError, "top_p"),
    ((torch.ones(3), 1.0, None, float("nan")), ValueError, "top_p"),
    ((torch.ones(3), 1.0, None, None, "seed"), TypeError, "generator"),
])
def test_errors_name_the_argument(args, exc, name):
    for fn in (fastpath.sample, fastpath.reference_sample):
        with pytest.raises(exc, match=f"^{name}: "):
            fn(*args)


def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(logits):
        return fastpath.sample(logits, temperature=0.0), fastpath.sample(logits, top_k=5, top_p=0.9)

    x = randn(3, 67, device=device)
    greedy, sampled = step(x)
    assert torch.equal(greedy, x.argmax(-1))
    assert sampled.shape == (3,) and sampled.dtype == torch.int64
    assert (x.topk(5, -1).indices == sampled.unsqueeze(-1)).any(-1).all()


# ------------------------------------------------------------------ pruned top-k (mode 2)

_SENT = -(2 ** 63) + 1


def _keys(x: torch.Tensor) -> torch.Tensor:
    """The kernel's int64 keys: order-preserving image of the float32 value, then the column
    (lowest column first among equal values)."""
    b = x.float().cpu().contiguous().view(torch.int32).long()
    b = b ^ ((b >> 31) & 0x7FFFFFFF)
    return (b << 32) | (0x7FFFFFFF - torch.arange(x.shape[-1]))


def _prune_paths(x: torch.Tensor, k: int):
    """Which way each phase of the pruned kernel goes, from the rule in sampling.py's
    docstring, in plain PyTorch: (chunk phase: one of "pruned", "fallback" or "full" (no
    pruning: chunk <= CAP) per (row block, chunk); merge phase: "pruned" or "fallback", and
    "/shallow" (every run has at most MERGE_DEPTH keys >= T) or "/deep", per row block; the
    plan). Used to check that a case exercises the path it is meant to."""
    B, V = x.shape
    k = min(k, V)
    kp = launch.next_pow2(k)
    chunk, S, bm = sampling._plan(B, V, kp, 2, x.device, prune=True)
    cap = max(launch.next_pow2(sampling.CAP), 2 * kp)
    rows = launch.cdiv(B, bm) * bm
    keys = torch.full((rows, S * chunk), _SENT, dtype=torch.int64)
    keys[:B, :V] = _keys(x)
    runs = torch.full((rows, S, kp), _SENT, dtype=torch.int64)
    chunks, merges = [], []
    for c in range(S):
        kc = keys[:, c * chunk:(c + 1) * chunk]
        top = kc.topk(kp, 1).values
        if chunk > cap:  # t: k-th largest of the maxima of 2 * kp strided groups
            t = kc.view(rows, chunk // (2 * kp), 2 * kp).max(1).values.topk(k, 1).values[:, -1]
            count = ((kc >= t[:, None]) & (kc != _SENT)).sum(1)
            for rb in range(0, rows, bm):
                pruned = bool(count[rb:rb + bm].max() <= cap)
                chunks.append("pruned" if pruned else "fallback")
                if pruned:  # the compacted buffer holds `count` keys: padding past them
                    kept = torch.arange(kp) < count[rb:rb + bm, None]
                    top[rb:rb + bm] = torch.where(kept, top[rb:rb + bm], _SENT)
        else:
            chunks += ["full"] * (rows // bm)
        runs[:, c] = top
    if S > 1:  # T: the larger of the best rank-(k-1) key of a chunk and the k-th largest
        r = min(kp, launch.next_pow2(launch.cdiv(sampling.MERGE_GROUPS * kp, S)))  # of the
        heads = runs[:, :, :r].reshape(rows, -1)  # top r keys of every chunk
        T = torch.maximum(runs[:, :, k - 1].max(1).values, heads.topk(k, 1).values[:, -1])
        count = ((runs >= T[:, None, None]) & (runs != _SENT)).sum((1, 2))
        d = max(1, min(launch.next_pow2(sampling.MERGE_DEPTH), kp // 2))
        deep = (runs[:, :, d].max(1).values >= T) & (torch.arange(rows) < B)  # a run has > d
        for rb in range(0, rows, bm):
            merges.append("pruned" if bool(count[rb:rb + bm].max() <= cap) else "fallback")
            merges[-1] += "/deep" if bool(deep[rb:rb + bm].any()) else "/shallow"
    return chunks, merges, (chunk, S, bm)


def _hot_residues(V: int, k: int, scale=1.0) -> torch.Tensor:
    """A row whose large values all sit in k - 1 residues mod 2 * K_PAD: the strided group
    maxima bound is weak, (k - 1) * chunk / (2 K_PAD) keys pass it (chunk fallback)."""
    g = 2 * launch.next_pow2(k)
    x = torch.randn(V) - 10.0
    hot = torch.arange(V) % g < k - 1
    x[hot] = torch.rand(int(hot.sum())) + 10.0
    return x


def _hot_chunks(V: int, k: int, chunk: int) -> torch.Tensor:
    """A row whose k - 1 chunks 1 .. k-1 each hold nearly the same k large values: both merge
    bounds are weak, about (k - 1)**2 candidates pass (merge fallback)."""
    x = torch.randn(V) - 10.0
    for c in range(1, k):
        for j in range(k):
            x[c * chunk + 3 * j + 1] = 10.0 + 0.1 * j + 1e-4 * c
    return x


def _both_weak(V: int, k: int, chunk: int) -> torch.Tensor:
    """_hot_chunks, and a last chunk of _hot_residues below the hot chunks' values."""
    x = _hot_chunks(V, k, chunk)
    x[-chunk:] = _hot_residues(chunk, k) - 10.0
    return x


def _rows(*rows) -> torch.Tensor:
    return torch.stack([r if isinstance(r, torch.Tensor) else r() for r in rows])


# (id, logits on the CPU, top_k, top_p, knobs, expected chunk-phase paths, merge-phase paths)
PRUNE_CASES = [
    ("random", lambda: torch.randn(3, 1000) * 2, 5, 0.8, {}, {"pruned"}, {"pruned/shallow"}),
    ("k2", lambda: torch.randn(2, 1000) * 2, 2, None, {}, {"pruned"}, {"pruned/deep"}),
    ("k_near_chunk", lambda: torch.randn(2, 1000), 60, 0.9, dict(MIN_CHUNK=256),
     {"pruned"}, {"pruned/deep"}),
    ("k_is_chunk", lambda: torch.randn(2, 1000), 250, 0.95, {}, set(), {"pruned/deep"}),
    ("one_chunk", lambda: torch.randn(16, 250) * 3, 13, 0.7, {}, {"pruned"}, set()),
    ("chunk_fallback_bm2", lambda: _rows(lambda: torch.randn(1024) * 2, _hot_residues(1024, 7),
                                         lambda: torch.randn(1024) * 2),
     7, 0.95, dict(BLOCK_ELEMS=512), {"pruned", "fallback"}, {"pruned/shallow"}),
    ("merge_fallback_bm2", lambda: _rows(lambda: torch.randn(1024) * 2, _hot_chunks(1024, 7, 64),
                                         lambda: torch.randn(1024) * 2),
     7, None, dict(MAX_CHUNK=64, BLOCK_ELEMS=256), {"pruned"},
     {"pruned/shallow", "fallback/deep"}),
    ("merge_fallback_tiles", lambda: _rows(_hot_chunks(1024, 7, 64)), 7, 0.9,
     dict(MAX_CHUNK=64, MERGE_TILE=32), {"pruned"}, {"fallback/deep"}),
    ("both_fallback", lambda: _rows(_both_weak(2048, 7, 128)), 7, None, dict(MAX_CHUNK=128),
     {"pruned", "fallback"}, {"fallback/deep"}),
    ("masked_vocab", lambda: torch.where(torch.rand(2, 2000) < 0.97, -float("inf"),
                                         torch.randn(2, 2000) * 2), 50, 0.9, {},
     {"pruned"}, {"pruned/deep"}),
]


#: sampling.py's plan constants under the interpreter (and its 4 "SMs").
INTERPRETER_PLAN = dict(MIN_CHUNK=64, MAX_CHUNK=256, MAX_MERGE=1024, BLOCK_ELEMS=8192, PRUNE_MIN_K=1,
                        PRUNE_MAX_K=1 << 30, PRUNE_MIN_CHUNK=64, CAP=32, MERGE_TILE=128, num_sms=lambda d: 4)


@pytest.mark.parametrize("case", PRUNE_CASES, ids=[c[0] for c in PRUNE_CASES])
def test_pruned_top_k_matches_reference(device, monkeypatch, case):
    """The pruned path (and its fallbacks, in each phase and for a block of rows with mixed
    paths) against the reference with the same random numbers, and against the unpruned
    path; the host model `_prune_paths` checks that each case takes the paths it is for."""
    _, make, top_k, top_p, knobs, want_chunk, want_merge = case
    if not backend.INTERPRET:  # the cases are sized for the interpreter's plan: use it on a GPU too
        knobs = {**INTERPRETER_PLAN, **knobs}
    for name, value in knobs.items():
        monkeypatch.setattr(sampling, name, value)
    x = make()
    chunks, merges, (_, _, bm) = _prune_paths(x, top_k)
    assert set(chunks) - {"full"} == want_chunk and set(merges) == want_merge, (chunks, merges)
    assert bm == 2 or not case[0].endswith("bm2")  # row 0 prunes alone, row 1 does not
    x = noncontig(x.to(device))
    kw = dict(temperature=0.7, top_k=top_k, top_p=top_p)
    ref = fastpath.reference_sample(x, generator=_gen(device, 21), **kw)
    assert torch.equal(fastpath.sample(x, generator=_gen(device, 21), **kw), ref)
    monkeypatch.setattr(sampling, "PRUNE", False)
    assert torch.equal(fastpath.sample(x, generator=_gen(device, 21), **kw), ref)
    for (_, _, name), buf in launch._workspaces.items():
        if name == "sample.counters":
            assert not buf.any()


def _stable_reference(x, seeds, temperature, top_k, top_p):
    """Inverse-CDF sampling over the top k in float64, equal values ordered by column (the
    kernel's order; torch.topk leaves the order of ties unspecified)."""
    x = x.double().cpu()
    order = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :top_k]
    e = torch.exp((x.gather(1, order) - x.gather(1, order[:, :1])) / temperature)
    p = e / e.sum(-1, keepdim=True)
    keep = (p.cumsum(-1) - p) < top_p
    keep[:, 0] = True
    c = (e * keep).cumsum(-1)
    u = (seeds.cpu() & 0xFFFFFF).double() * 2.0 ** -24
    r = (c <= (u * c[:, -1]).unsqueeze(-1)).sum(-1)
    r = torch.minimum(r, keep.sum(-1) - 1)
    return order.gather(1, r.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("layout", ["equal", "steps"])
def test_pruned_top_k_ties(device, layout):
    """All-equal logits, and a few values repeated over the row: the top k are the lowest
    columns among equal values, as in argmax."""
    B, V = 4, 1000
    x = torch.zeros(B, V) if layout == "equal" else torch.randint(0, 4, (B, V)).float()
    x = x.to(device)
    seeds = torch.randint(0, 2 ** 62, (B,), generator=_gen("cpu", 8)).to(device)
    # (top_p away from the cumulative sums of equal probabilities: 12 x 1/12 summed in float32
    # reaches 0.5 only up to rounding, which may keep a 7th value where float64 keeps 6)
    for top_k, top_p in [(1, 0.5), (5, 1.0), (12, 0.45), (64, 0.9)]:
        out = sampling._sample_op(x, seeds, 0.9, top_k, top_p)
        assert torch.equal(out.cpu(), _stable_reference(x, seeds, 0.9, top_k, top_p))
