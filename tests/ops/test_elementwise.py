"""Elementwise ops against exact references: torch's CPU result, float64, Python ints."""
import math
import random

import pytest
import torch

import fastpath.ops.elementwise as ew
from tests.conftest import AWKWARD, DEVICE, noncontig, randn

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
_INT_OF = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
           torch.float64: torch.int64}


def _special_values(dtype):
    fi = torch.finfo(dtype)
    sub = fi.smallest_normal * fi.eps  # smallest subnormal
    vals = [0.0, -0.0, math.inf, -math.inf, math.nan, fi.max, -fi.max, fi.tiny, -fi.tiny,
            sub, -sub, 3 * sub, fi.tiny / 2, fi.tiny * (1 - fi.eps), -fi.tiny / 3, 1.0, -0.75, 8.0]
    return torch.tensor(vals, dtype=torch.float64).to(dtype)


def _assert_frexp(x):
    m, e = ew.frexp(x)
    rm, re_ = torch.frexp(x)
    assert m.dtype == x.dtype and e.dtype == torch.int32 and m.shape == x.shape
    assert torch.equal(e, re_)
    nan = rm.isnan()
    assert torch.equal(m.isnan(), nan)
    it = _INT_OF[x.dtype]
    assert torch.equal(m[~nan].contiguous().view(it), rm[~nan].contiguous().view(it))  # bit-exact
    # and the decomposition reconstructs the input exactly (float64)
    fin = torch.isfinite(x)
    m, e, x = m[fin].double().cpu(), e[fin].double().cpu(), x[fin].double().cpu()  # CUDA's pow is not exact
    half = torch.div(e, 2, rounding_mode="floor")  # 2**e in two factors: float64's max and subnormals too
    assert torch.equal(m * torch.pow(2.0, half) * torch.pow(2.0, e - half), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_frexp_special_values(dtype):
    _assert_frexp(_special_values(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_frexp_all_subnormals_and_random(dtype):
    if dtype == torch.float64:  # the smallest subnormals, random subnormals, random patterns
        bits = torch.cat([torch.arange(1, 5000, dtype=torch.int64),
                          torch.randint(0, 2**52, (1000,), dtype=torch.int64),
                          torch.randint(-2**63, 2**63 - 1, (1000,), dtype=torch.int64)])
    elif dtype == torch.float32:
        bits = torch.cat([torch.arange(1, 5000, dtype=torch.int32),
                          torch.randint(0, 2**23, (1000,), dtype=torch.int32),
                          torch.randint(-2**31, 2**31 - 1, (1000,), dtype=torch.int32)])
    else:  # every 16-bit pattern
        bits = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16)
    _assert_frexp(bits.view(dtype))


@pytest.mark.parametrize("n", AWKWARD)
def test_frexp_sizes_and_noncontiguous(n):
    x = randn(3, n, scale=100.0)
    _assert_frexp(x)
    _assert_frexp(noncontig(x))
    _assert_frexp(x.t())


def test_frexp_float64_reference_and_errors():
    x = torch.tensor([0.0, 5e-324, 3.0, -math.inf], dtype=torch.float64)
    m, e = ew.frexp(x)
    rm, re_ = torch.frexp(x)
    assert torch.equal(m, rm) and torch.equal(e, re_)
    with pytest.raises(TypeError, match="input"):
        ew.frexp(torch.arange(3))
    with pytest.raises(TypeError, match="input"):
        ew.frexp([1.0])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 7, 67, 1000])
def test_heaviside(dtype, n):
    x = randn(4, n).to(dtype)
    x[:, ::3] = 0
    x[0, -1] = math.nan
    v = randn(n).to(dtype)
    v[0] = math.nan
    for a, b in ((x, v), (noncontig(x), v[None, :]), (x.t().contiguous().t(), randn(4, 1).to(dtype))):
        out = ew.heaviside(a, b)
        ref = torch.heaviside(a, b)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        assert torch.equal(out.isnan(), ref.isnan())
        assert torch.equal(out[~ref.isnan()], ref[~ref.isnan()])


def test_heaviside_errors_and_reference_dtypes():
    with pytest.raises(TypeError, match="values"):
        ew.heaviside(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="values"):
        ew.heaviside(torch.zeros(3), torch.zeros(4))
    x = torch.tensor([-2, 0, 3])
    assert torch.equal(ew.heaviside(x, torch.tensor([7])), torch.tensor([0, 7, 1]))


U = [torch.uint8, torch.uint16, torch.uint32, torch.uint64]
BITS = {torch.uint8: 8, torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}
PY = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
      "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
      "minimum": min, "maximum": max}
_SIGNED = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}


def _utensor(vals, dtype, shape):
    bits = BITS[dtype]
    signed = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in vals]
    return torch.tensor(signed, dtype=_SIGNED[bits]).view(dtype).reshape(shape)


def _uvalues(t):
    bits = BITS[t.dtype]
    return [v % (1 << bits) for v in t.contiguous().view(_SIGNED[bits]).flatten().tolist()]


def _urandom(rng, dtype, n):
    bits = BITS[dtype]
    edge = [0, 1, 3, 7, (1 << (bits - 1)) - 1, 1 << (bits - 1), (1 << (bits - 1)) + 1,
            (1 << (bits - 1)) + 5, (1 << bits) - 1]
    return [rng.choice(edge) if rng.random() < 0.3 else rng.randrange(1 << bits) for _ in range(n)]


@pytest.mark.parametrize("dtype", U)
@pytest.mark.parametrize("n", [1, 7, 67])
def test_unsigned_compare_and_minmax(dtype, n):
    rng = random.Random(BITS[dtype] * 1000 + n)
    a_vals, b_vals = _urandom(rng, dtype, 3 * n), _urandom(rng, dtype, 3 * n)
    b_vals[::4] = a_vals[::4]  # some equal pairs
    a, b = _utensor(a_vals, dtype, (3, n)), _utensor(b_vals, dtype, (3, n))
    col = _utensor(_urandom(rng, dtype, 3), dtype, (3, 1))
    for op, py in PY.items():
        fn = getattr(ew, op)
        for x, y in ((a, b), (noncontig(a), b), (a.t(), b.t().contiguous()), (a, col)):
            out = fn(x, y)
            xb, yb = torch.broadcast_tensors(x, y)
            want = [py(p, q) for p, q in zip(_uvalues(xb), _uvalues(yb))]
            if op in ("minimum", "maximum"):
                assert out.dtype == dtype and _uvalues(out) == want, op
            else:
                assert out.dtype == torch.bool and out.flatten().tolist() == want, op
            ref = ew.reference_compare(op, x, y)  # the reference path agrees too
            assert torch.equal(ref.view(torch.uint8) if ref.dtype == torch.bool else ref.view(_SIGNED[BITS[dtype]]),
                               out.view(torch.uint8) if out.dtype == torch.bool else out.view(_SIGNED[BITS[dtype]]))


def test_unsigned_above_signed_range_with_python_ints():
    big = _utensor([2**63 + 5, 3], torch.uint64, (2,))
    assert ew.gt(big, 3).tolist() == [True, False]
    assert ew.lt(big, 2**63 + 6).tolist() == [True, True]
    assert _uvalues(ew.maximum(big, _utensor([3, 2**63 + 5], torch.uint64, (2,)))) == [2**63 + 5] * 2
    u32 = _utensor([2**31 + 1, 7], torch.uint32, (2,))
    assert ew.gt(u32, 7).tolist() == [True, False]
    assert _uvalues(ew.minimum(u32, _utensor([7, 2**32 - 1], torch.uint32, (2,)))) == [7, 7]
    # other dtypes go to torch
    assert torch.equal(ew.lt(torch.tensor([1, -2]), torch.tensor([0, 0])), torch.tensor([False, True]))


def test_unsigned_errors():
    a = torch.zeros(3, dtype=torch.uint32)
    with pytest.raises(ValueError, match="other"):
        ew.lt(a, 2**32)
    with pytest.raises(ValueError, match="other"):
        ew.lt(a, -1)
    with pytest.raises(NotImplementedError, match="other"):
        ew.lt(a, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="other"):
        ew.eq(a, torch.zeros(4, dtype=torch.uint32))
    with pytest.raises(TypeError, match="other"):
        ew.eq(a, 1.5)
    with pytest.raises(TypeError, match="input"):
        ew.eq(3, a)


@pytest.mark.parametrize("n", [1, 7, 67, 1000])
def test_take(n):
    x = randn(5, n)
    numel = x.numel()
    idx = torch.randint(-numel, numel, (3, 7)).to(x.device)
    for src in (x, noncontig(x), x.t()):
        for ind in (idx, idx.t(), idx[:, ::2]):
            out = ew.take(src, ind)
            ref = torch.take(src, ind)
            assert torch.equal(out, ref)
            flat = src.flatten().tolist()
            assert out.flatten().tolist() == [flat[i] for i in ind.flatten().tolist()]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.bool,
                                   torch.uint8, torch.uint16, torch.uint32, torch.uint64])
def test_take_dtypes(dtype):
    base = torch.randint(-100, 100, (4, 7)).to(torch.int64)
    if dtype in (torch.uint16, torch.uint32, torch.uint64):
        x = _utensor([v % (1 << BITS[dtype]) for v in base.flatten().tolist()], dtype, (4, 7))
    else:
        x = base.to(dtype)
    idx = torch.tensor([[0, -1, 27], [-28, 5, 13]])
    out = ew.take(x.t(), idx)
    ref = ew.reference_take(x.t(), idx)
    assert out.dtype == dtype and torch.equal(out.view(torch.uint8) if dtype == torch.bool else out,
                                             ref.view(torch.uint8) if dtype == torch.bool else ref)


def test_take_errors_and_edges():
    x = torch.arange(6.0)
    with pytest.raises(IndexError, match="index"):
        ew.take(x, torch.tensor([6]))
    with pytest.raises(IndexError, match="index"):
        ew.take(x, torch.tensor([0, -7]))
    with pytest.raises(IndexError, match="index"):
        ew.take(torch.empty(0), torch.tensor([0]))
    with pytest.raises(TypeError, match="index"):
        ew.take(x, torch.tensor([1], dtype=torch.int32))
    # validate=False: no sync, out-of-range masked to 0, in-range entries correct
    out = ew.take(x, torch.tensor([1, 100, -1]), validate=False)
    assert out.tolist() == [1.0, 0.0, 5.0]
    assert torch.equal(ew.take(torch.tensor(5.0), torch.tensor([0, -1])), torch.tensor([5.0, 5.0]))
    assert ew.take(x, torch.empty(0, 3, dtype=torch.int64)).shape == (0, 3)


def test_take_validate_refused_under_graph_capture(monkeypatch):
    """validate=True's flag read cannot be captured: a clear error before any work (the
    capture simulated), validate=False runs."""
    monkeypatch.setattr("fastpath._core.errors._capturing", lambda device: True)
    x, idx = torch.arange(6.0, device=DEVICE), torch.tensor([1, -1, 4], device=DEVICE)
    with pytest.raises(RuntimeError, match="take: validate=True .* pass validate=False"):
        ew.take(x, idx)
    assert ew.take(x, idx, validate=False).cpu().tolist() == [1.0, 5.0, 4.0]


LOGSPACE_CASES = [
    (0, 3, 4, 10.0, None), (0, 10, 7, 2.0, torch.int64), (1, -1, 5, -2.0, None),
    (0, 1, 1, 10.0, None), (2, 3, 0, 10.0, None), (-3.3, 2.7, 67, 10.0, torch.float64),
    (0, 3, 5, 10.0, torch.float16), (-1.5, 2.25, 13, 3.0, torch.bfloat16), (0, 5, 1000, 1.7, torch.float32),
    (0, 9, 7, 2.5, torch.int32), (1, 4, 13, 10.0, torch.int16), (0, 7, 8, 2.0, torch.uint8),
]


@pytest.mark.parametrize("case", LOGSPACE_CASES)
def test_logspace_matches_torch_bitwise(case):
    start, end, steps, base, dtype = case
    out = ew.logspace(start, end, steps, base=base, dtype=dtype)
    ref = torch.logspace(start, end, steps, base=base, dtype=dtype)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert torch.equal(out.isnan(), ref.isnan()) if ref.is_floating_point() else True
    keep = ~ref.isnan() if ref.is_floating_point() else torch.ones_like(ref, dtype=torch.bool)
    assert torch.equal(out[keep], ref[keep])


def test_logspace_kernel_matches_torch_bitwise(monkeypatch):
    """The kernel path (float32 / float16 / bfloat16, forced for few steps here) against
    PyTorch's CPU kernel, bit for bit: bases above and below 1, exponents whose powers
    overflow to inf and underflow through the subnormals, both halves of the sequence."""
    monkeypatch.setattr(ew, "LOGSPACE_KERNEL_STEPS", 2)
    calls = []
    real = ew._logspace_kernel_path
    monkeypatch.setattr(ew, "_logspace_kernel_path", lambda *a: calls.append(1) or real(*a))
    rng = random.Random(3)
    cases = [(0, 3, 4, 10.0), (-5, 5, 1001, 10.0), (0, 1, 129, 2.0), (-300, 300, 77, 10.0), (3, -3, 100, 0.5),
             (-1100, 1100, 501, 2.0), (0.1, 38.5, 99, 10.0), (0, 20, 21, 10.0), (-46, -30, 100, 10.0)]
    cases += [(rng.uniform(-40, 40), rng.uniform(-40, 40), rng.choice([2, 3, 67, 300]),
               rng.choice([10.0, 2.0, 0.7, 3.3, 1.0001, math.e])) for _ in range(20)]
    for start, end, steps, base in cases:
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            assert ew._logspace_kernel_path(start, end, steps, base, dtype, torch.device(DEVICE)) is not None
            out = ew.logspace(start, end, steps, base, dtype, device=DEVICE)
            ref = torch.logspace(start, end, steps, base, dtype=dtype)
            assert out.dtype == dtype and torch.equal(out.cpu(), ref), (start, end, steps, base, dtype)
    assert len(calls) == 2 * len(cases) * 3
    for args in ((0, 3, 10, 10.0, torch.float64), (0, 3, 10, 10.0, torch.int64), (0, 3, 10, -2.0, torch.float32),
                 (0, 3, 10, 1.0, torch.float32), (0, float("inf"), 10, 2.0, torch.float32)):
        assert ew._logspace_kernel_path(*args, torch.device(DEVICE)) is None  # the host path, exact
        torch.testing.assert_close(ew.logspace(*args[:4], dtype=args[4], device=DEVICE).cpu(),
                                   torch.logspace(*args[:4], dtype=args[4]), rtol=0, atol=0, equal_nan=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a million steps on the GPU")
def test_logspace_kernel_large_gpu():
    for dtype in (torch.float32, torch.bfloat16):
        out = ew.logspace(-20, 20, 1_000_003, 10.0, dtype, device="cuda")
        assert torch.equal(out.cpu(), torch.logspace(-20, 20, 1_000_003, 10.0, dtype=dtype))


def test_logspace_random_and_errors():
    rng = random.Random(0)
    for _ in range(100):
        dtype = rng.choice([torch.float32, torch.float64, torch.float16, torch.int64])
        s, e = (rng.uniform(-3, 3), rng.uniform(-3, 3)) if dtype.is_floating_point else (
            rng.randint(0, 4), rng.randint(0, 9))
        steps, base = rng.choice([2, 3, 7, 67]), rng.choice([10.0, 2.0, 0.7, 3.3])
        assert torch.equal(ew.logspace(s, e, steps, base, dtype), torch.logspace(s, e, steps, base, dtype=dtype))
    with pytest.raises(ValueError, match="steps"):
        ew.logspace(0, 1, -1)
    with pytest.raises(TypeError, match="steps"):
        ew.logspace(0, 1, 2.0)
    with pytest.raises(TypeError, match="start"):
        ew.logspace("0", 1, 2)
    with pytest.raises(NotImplementedError, match="dtype"):
        ew.logspace(0, 1, 2, dtype=torch.complex64)


# ---------------------------------------------------------------- kernel variants (layouts, index width, blocks)

def _ndim_of(t):
    lay = ew._layout(t.shape, t.stride())
    return None if lay is None else ew._ndim(lay[0])


def _views():
    """Views whose simplified layout has 1 (strided), 2, 3, 4 and more than 4 dims."""
    base = randn(3, 4, 5, 6)
    views = {1: randn(40)[::3], 2: base[::2], 3: randn(4, 5, 6)[:, ::2, ::2],
             4: base.permute(0, 2, 1, 3), None: randn(2, 3, 2, 3, 2).permute(0, 2, 4, 1, 3)}
    for nd, v in views.items():
        assert _ndim_of(v) == nd  # each variant of the kernels is really taken
    return views


def _ucopy(v, dtype, seed):
    """Unsigned values over the whole range (half above the signed maximum) in ``v``'s layout."""
    g = torch.Generator().manual_seed(seed)
    bits = BITS[dtype]
    s = torch.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1, v.shape, generator=g, dtype=torch.int64)
    out = torch.empty_strided(v.shape, v.stride(), dtype=_SIGNED[bits])
    out.copy_(s.to(_SIGNED[bits]))
    return out.view(dtype)


def _strided_like(v, values):
    """``values`` in a tensor with ``v``'s strides (a fresh buffer, same layout)."""
    out = torch.empty_strided(v.shape, v.stride(), dtype=values.dtype)
    out.copy_(values)
    return out


def _check_every_op(views):
    for nd, v in views.items():
        x = _strided_like(v, (v * 1e3).round() / 16)
        _assert_frexp(x)
        zx = _strided_like(v, torch.where(x.abs() < 30, torch.zeros_like(x), x))  # exact zeros
        assert _ndim_of(x) == _ndim_of(zx) == nd
        for val in (_strided_like(v, torch.full(v.shape, 0.25)), torch.tensor(-2.0)):
            out = ew.heaviside(zx, val)
            assert torch.equal(out, torch.heaviside(zx, val)), nd
        for dtype in U:
            a = _ucopy(v, dtype, 1)
            b = _ucopy(v, dtype, 2)
            assert _ndim_of(a) == _ndim_of(b) == nd
            for op in ("eq", "lt", "ge", "maximum"):
                out = getattr(ew, op)(a, b)
                want = [PY[op](p, q) for p, q in zip(_uvalues(a), _uvalues(b))]
                got = _uvalues(out) if op == "maximum" else out.flatten().tolist()
                assert got == want, (nd, dtype, op)
        idx = torch.randint(-v.numel(), v.numel(), (5, 7)).to(v.device)
        for ind in (idx, idx.t()):
            out = ew.take(v, ind)
            flat = v.flatten().tolist()
            assert out.flatten().tolist() == [flat[i] for i in ind.flatten().tolist()], nd


def test_layout_variants_every_op():
    _check_every_op(_views())


def test_int64_index_path(monkeypatch):
    """The 64-bit index arithmetic (taken above 2**31 elements) on small strided inputs."""
    monkeypatch.setattr(ew, "_needs_int64", lambda *a: True)
    views = _views()
    _check_every_op({k: views[k] for k in (1, 3, 4)})


def test_needs_int64_bounds():
    assert not ew._needs_int64(2**31 - 2048, 1024, [1, 1, 1, 2**31 - 2048], [0, 0, 0, 1])
    assert ew._needs_int64(2**31 - 1000, 1024, [1, 1, 1, 2**31 - 1000], [0, 0, 0, 1])
    # few elements, but an element offset (3 - 1) * 2**30 beyond int32 in the second operand
    assert ew._needs_int64(6, 8, [1, 1, 3, 2], [0, 0, 2, 1], [0, 0, 2**30, 1])
    assert not ew._needs_int64(6, 8, [1, 1, 3, 2], [0, 0, 2, 1], [0, 0, 0, 0])


def test_config_rule_and_tuned_table(monkeypatch):
    monkeypatch.setattr(ew, "TUNED", {})  # the rule alone
    grid, block, warps = ew._config("cmp", torch.uint8, 3, 1 << 26)  # 32 KB / 3 B -> 8192
    assert (block, warps) == (8192, 8) and grid == ((1 << 26) // 8192,)
    assert ew._config("cmp", torch.uint64, 17, 1 << 26)[1:] == (1024, 4)  # clamped to MIN_BLOCK
    assert ew._config("frexp", torch.bfloat16, 8, 1 << 26)[1:] == (4096, 8)
    assert ew._config("cmp", torch.uint8, 3, 7)[1:] == (8, 1)  # tiny: one small program
    monkeypatch.setitem(ew.TUNED, ("cmp", torch.uint8), (256, 2))
    assert ew._config("cmp", torch.uint8, 3, 1000) == ((4,), 256, 2)


@pytest.mark.parametrize("tuned", [None, (256, 2)])
def test_many_programs_with_tail(tuned, monkeypatch):
    """Several programs and a partial last one, with the default blocks and a tuned one."""
    if tuned is not None:
        for key in (("frexp", torch.bfloat16), ("heaviside", torch.float32), ("cmp", torch.uint8),
                    ("cmp", torch.uint16), ("take", torch.float32)):
            monkeypatch.setitem(ew.TUNED, key, tuned)
    n = 2 * 8192 + 13
    x = randn(n, scale=1e3).to(torch.bfloat16)
    x[::5] = 0
    _assert_frexp(x)
    xf, v = x.float(), randn(n)
    assert torch.equal(ew.heaviside(xf, v), torch.heaviside(xf, v))
    for dtype in (torch.uint8, torch.uint16):
        a, b = _ucopy(xf, dtype, 3), _ucopy(xf, dtype, 4)
        b[::3] = a[::3]
        sa, sb = a.view(_SIGNED[BITS[dtype]]).long() % (1 << BITS[dtype]), b.view(_SIGNED[BITS[dtype]]).long() % (1 << BITS[dtype])
        assert torch.equal(ew.eq(a, b), sa == sb) and torch.equal(ew.lt(a, b), sa < sb)
        mn = ew.minimum(a, b).view(_SIGNED[BITS[dtype]]).long() % (1 << BITS[dtype])
        assert torch.equal(mn, torch.minimum(sa, sb))
    idx = torch.randint(-n, n, (n - 5,)).to(xf.device)
    assert torch.equal(ew.take(xf, idx), xf[idx % n])


def test_frexp_float32_subnormal_every_leading_bit():
    bits = [1 << k for k in range(23)] + [(1 << (k + 1)) - 1 for k in range(23)] + [(1 << 23) - 2, 5 << 20]
    t = torch.tensor(bits, dtype=torch.int32)
    _assert_frexp(torch.cat([t, t | torch.tensor(-2**31, dtype=torch.int32)]).view(torch.float32))


def test_take_flag_is_clear_after_an_error_and_per_thread():
    import threading
    x = torch.arange(10.0)
    bad = torch.tensor([3, 10])
    with pytest.raises(IndexError, match="index"):
        ew.take(x, bad)
    assert ew.take(x, torch.tensor([9, -10])).tolist() == [9.0, 0.0]  # no stale flag
    assert ew.take(x, bad, validate=False).tolist() == [3.0, 0.0]  # leaves no flag either
    assert ew.take(x, torch.tensor([1])).tolist() == [1.0]
    with pytest.raises(IndexError, match="index"):  # strided index, bad entry not first
        ew.take(x, torch.tensor([[0, 1], [2, -11]]).t())
    errors = []

    def worker():
        try:
            ew.take(x, bad)
        except IndexError as exc:
            errors.append(exc)
    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert len(errors) == 1  # the other thread's failure is its own
    assert ew.take(x, torch.tensor([2])).tolist() == [2.0]
