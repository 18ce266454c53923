"""bincount against torch.bincount (exact counts; weights against float64 sums): uniform and
skewed data, every path (register histogram, atomics with each skew handling, weighted
atomics, finishing in the counting launch or in a second one), the flag word, sizes and
validation."""
import contextlib

import pytest
import torch

from fastpath.ops import bincount as bc
from fastpath.ops.bincount import bincount, reference_bincount
from tests.conftest import DEVICE
from tests.tolerances import assert_close

INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
BIG = torch.cuda.is_available()  # full-size skew tests only where the kernels are compiled


def _ref(x, weights=None, minlength=0):
    """torch.bincount on the CPU; weights summed in float64."""
    w = None if weights is None else weights.cpu().double()
    return torch.bincount(x.cpu().long(), w, minlength=minlength)


def _assert_counts(x, minlength=0):
    out = bincount(x, minlength=minlength)
    ref = _ref(x, minlength=minlength)
    assert out.dtype == torch.int64 and out.device == x.device
    assert torch.equal(out.cpu(), ref)


def _assert_float32_sums(out, x, w, minlength):
    """float32 sums of weights per bin, in whatever order the atomics land: each bin within the bound
    every summation order meets, n * 2^-24 * sum |w| for its n terms (a norm-wise 2e-6 fails now and
    then on a bin of ~900 signed terms whose sum cancels); bins of one term exact."""
    assert out.dtype == torch.float32 and out.device == x.device
    ref, n = _ref(x, w, minlength), _ref(x, minlength=minlength).double()
    bound = n * 2.0 ** -24 * _ref(x, w.abs(), minlength)
    err = (out.cpu().double() - ref).abs()
    assert (err <= bound).all(), f"bins {torch.nonzero(err > bound).flatten()[:5].tolist()} off by more than the bound"


# Each dtype with few bins (the register histogram; 255 values with minlength 268: the atomics) and
# with more (the atomics; uint8 / int8 values stop at 255 / 127: 256 bins, the fewest the atomics
# take, and 128, still the register histogram); every size at least once.
@pytest.mark.parametrize("dtype,hi", [(torch.uint8, 1), (torch.uint8, 1000), (torch.int8, 67), (torch.int8, 255),
                                      (torch.int16, 7), (torch.int16, 1000), (torch.int32, 255),
                                      (torch.int32, 3000), (torch.int64, 67), (torch.int64, 1000)])
def test_uniform_counts(dtype, hi):
    if hi > torch.iinfo(dtype).max + 1:
        hi = torch.iinfo(dtype).max + 1
    x = torch.randint(0, hi, (1300,), device=DEVICE).to(dtype)
    _assert_counts(x)
    _assert_counts(x, minlength=hi + 13)  # minlength fixes the size: the flag path
    _assert_counts(x[::3])  # strided


@pytest.mark.parametrize("n", [1, 7, 13, 67, 1000])
def test_awkward_sizes_and_repeat_calls(n):
    x = torch.randint(0, 500, (n,), device=DEVICE)
    for _ in range(2):  # the private copies are returned to zero after each call
        _assert_counts(x)
        _assert_counts(x, minlength=600)


def test_skewed_inputs():
    n, s = (2_000_000, 1) if BIG else (16_000, 5)  # the interpreter: fewer values and a fifth of the bins
    same = torch.full((n,), 123, device=DEVICE)
    _assert_counts(same)
    _assert_counts(same, minlength=1000)
    _assert_counts(torch.zeros(n, dtype=torch.int64, device=DEVICE), minlength=5)
    geo = torch.distributions.Geometric(probs=torch.tensor(0.05)).sample((n,)).long().to(DEVICE)
    _assert_counts(geo)  # heavy head, long tail
    _assert_counts(torch.sort(torch.randint(0, 5000 // s, (n,), device=DEVICE)).values)  # sorted runs
    _assert_counts(torch.randint(5000 // s - 10, 5000 // s + 10, (n,), device=DEVICE))  # a cluster far from 0
    mixed = torch.where(torch.rand(n, device=DEVICE) < 0.9, 7, torch.randint(0, 3000 // s, (n,), device=DEVICE))
    _assert_counts(mixed)
    hot_high = torch.where(torch.rand(n, device=DEVICE) < 0.9, 2900 // s,
                           torch.randint(0, 3000 // s, (n,), device=DEVICE))
    _assert_counts(hot_high)  # the hot value above the tile minimum's window


# Each weight dtype once: float32 sums (float32 weights) and float64 sums (the others), each with many
# bins and with few (float32: the last call's 10)
@pytest.mark.parametrize("wdtype,hi", [(torch.float32, 1000), (torch.float64, 1000), (torch.float16, 13),
                                       (torch.int32, 13)])
def test_weights(wdtype, hi):
    x = torch.randint(0, hi, (3000,), device=DEVICE)
    w = (torch.randn(3000, device=DEVICE) * 10).to(wdtype)
    out = bincount(x, w)
    assert out.dtype == torch.bincount(x.cpu(), w.cpu()).dtype  # float32 stays, the rest -> float64
    assert_close(out, _ref(x, w), dtype=out.dtype)
    out = bincount(x[::2], w[1::2], minlength=hi + 5)
    assert_close(out, _ref(x[::2], w[1::2], minlength=hi + 5), dtype=out.dtype)
    same = torch.full((5000,), 3, device=DEVICE)
    assert_close(bincount(same, w.new_ones(5000), minlength=10), _ref(same, w.new_ones(5000), 10), dtype=out.dtype)


def test_sizes_follow_torch():
    x = torch.tensor([0, 5, 5, 2], device=DEVICE)
    assert torch.equal(bincount(x, minlength=3).cpu(), _ref(x, minlength=3))  # minlength too small: redone
    assert torch.equal(bincount(x, minlength=9).cpu(), _ref(x, minlength=9))
    empty = torch.empty(0, dtype=torch.int64, device=DEVICE)
    assert torch.equal(bincount(empty).cpu(), _ref(empty))
    assert torch.equal(bincount(empty, minlength=4).cpu(), _ref(empty, minlength=4))
    assert bincount(empty, torch.empty(0, device=DEVICE), minlength=2).dtype == torch.float32


def test_validate_false_skips_out_of_range_without_sync():
    x = torch.tensor([3, -1, 9, 0, 3, 12, 2, -7], device=DEVICE)
    out = bincount(x, minlength=10, validate=False)
    keep = x[(x >= 0) & (x < 10)]
    assert torch.equal(out.cpu(), _ref(keep, minlength=10))
    w = torch.arange(8.0, device=DEVICE)
    outw = bincount(x, w, minlength=10, validate=False)
    m = (x >= 0) & (x < 10)
    assert_close(outw, _ref(x[m], w[m], 10), dtype=torch.float32)
    big = torch.randint(0, 2000, (3000,), device=DEVICE)
    assert torch.equal(bincount(big, minlength=1000, validate=False).cpu(),
                       _ref(big[big < 1000], minlength=1000))


@contextlib.contextmanager
def _deterministic(warn_only=False):
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def test_deterministic_mode_as_torch(monkeypatch):
    """Under torch.use_deterministic_algorithms(True): counts and the interpreter's (sequential)
    sums run; weighted sums through a GPU's atomics raise as torch.bincount's do on CUDA, or warn
    with warn_only=True (then still summed right)."""
    x = torch.randint(0, 30, (700,), device=DEVICE)
    w = torch.randn(700, device=DEVICE)
    with _deterministic():
        assert torch.equal(bincount(x, minlength=40).cpu(), _ref(x, minlength=40))
        if DEVICE.type == "cuda":
            with pytest.raises(RuntimeError, match="fastpath.bincount with weights .* deterministic"):
                bincount(x, w, minlength=40)
        else:
            _assert_float32_sums(bincount(x, w, minlength=40), x, w, 40)
            monkeypatch.setattr(bc, "INTERPRET", False)  # as compiled: the check before any launch
            monkeypatch.setattr(bc, "use_triton", lambda t: True)
            with pytest.raises(RuntimeError, match="fastpath.bincount with weights .* deterministic"):
                bincount(x, w, minlength=40)
            monkeypatch.undo()
    with _deterministic(warn_only=True):
        with pytest.warns(UserWarning, match="deterministic") if DEVICE.type == "cuda" else contextlib.nullcontext():
            _assert_float32_sums(bincount(x, w, minlength=40), x, w, 40)
    _assert_float32_sums(bincount(x, w, minlength=40), x, w, 40)  # the mode off: no alert


def test_errors():
    with pytest.raises(ValueError, match="input"):
        bincount(torch.tensor([1, -1, 3], device=DEVICE))
    with pytest.raises(ValueError, match="input"):
        bincount(torch.tensor([1, -1, 3], device=DEVICE), minlength=10)
    with pytest.raises(ValueError, match="input"):
        bincount(torch.zeros(2, 3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(TypeError, match="input"):
        bincount(torch.zeros(3, device=DEVICE))
    with pytest.raises(TypeError, match="input"):
        bincount([1, 2])
    with pytest.raises(ValueError, match="weights"):
        bincount(torch.zeros(3, dtype=torch.int64, device=DEVICE), torch.ones(4, device=DEVICE))
    with pytest.raises(TypeError, match="weights"):
        bincount(torch.zeros(3, dtype=torch.int64, device=DEVICE), torch.ones(3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="minlength"):
        bincount(torch.zeros(3, dtype=torch.int64, device=DEVICE), minlength=-1)
    with pytest.raises(ValueError, match="minlength"):
        bincount(torch.zeros(3, dtype=torch.int64, device=DEVICE), validate=False)


def test_validate_refused_under_graph_capture(monkeypatch):
    """validate=True reads back to the host: under a CUDA graph capture it raises a clear error
    before any work (here the capture is simulated; the GPU test below captures for real);
    validate=False runs."""
    monkeypatch.setattr("fastpath._core.errors._capturing", lambda device: True)
    x = torch.randint(0, 40, (500,), device=DEVICE)
    for kw in ({}, {"minlength": 50}):
        with pytest.raises(RuntimeError, match="bincount: validate=True .* pass validate=False"):
            bincount(x, **kw)
    assert torch.equal(bincount(x, minlength=50, validate=False).cpu(), _ref(x, minlength=50))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a real CUDA graph capture needs a GPU")
@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # the refused capture ends with nothing in it
def test_graph_capture_real():
    x = torch.randint(0, 40, (5000,), device="cuda")
    bincount(x, minlength=50, validate=False)  # compiled outside the capture
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="validate=False"):
        with torch.cuda.graph(g):
            bincount(x, minlength=50)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = bincount(x, minlength=50, validate=False)
    x.copy_(torch.randint(0, 50, (5000,), device="cuda"))
    g.replay()
    assert torch.equal(out.cpu(), _ref(x, minlength=50))


def test_compiles_fullgraph_without_sync():
    x = torch.randint(0, 40, (500,), device=DEVICE)
    fn = torch.compile(lambda t: bincount(t, minlength=50, validate=False), fullgraph=True, backend="aot_eager")
    assert torch.equal(fn(x).cpu(), _ref(x, minlength=50))


# Knob settings that select the other code paths of the kernel: each skew handling of the
# atomic path, the finishing step as a second launch, one shared copy, int64 offsets, and
# tiny tiles (many tiles a program, a finishing tile narrower than the bins and copies).
VARIANTS = [{"WINDOW": 0}, {"WINDOW": 32}, {"WINDOW": 64, "BLOCK": 64},
            {"COPIES": 1, "PROGS_PER_SM": 3}, {"I64_FROM": 0}, {"BLOCK": 32, "SUM_TILE": (2, 8)}]
if torch.cuda.is_available():  # the shared-memory histograms (compiled only, off in the interpreter):
    # off (the atomics above run on the GPU too), small tiles (many a program), shared copies
    VARIANTS += [{"SMEM": False}, {"SMEM_PLAN": (256, 4, 1)}, {"SMEM_PLAN": (512, 4, 2), "SMEM_COPIES": 1}]


@pytest.mark.parametrize("knobs", VARIANTS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_kernel_variants(knobs, monkeypatch):
    for name, value in knobs.items():
        monkeypatch.setattr(bc, name, value)
    n = 1100
    uniform = torch.randint(0, 1000, (n,), device=DEVICE)
    hot = torch.where(torch.rand(n) < 0.8, 611, torch.randint(0, 1000, (n,))).to(DEVICE)
    for _ in range(2):  # the copies, accumulator and counters are zero again after a call
        _assert_counts(uniform, minlength=1000)  # atomics
    _assert_counts(torch.sort(hot).values, minlength=1000)  # a hot value in runs
    _assert_counts(torch.randint(0, 50, (n,), device=DEVICE), minlength=70)  # register histogram
    assert torch.equal(bincount(hot[::3], minlength=1000, validate=False).cpu(), _ref(hot[::3], minlength=1000))
    w = torch.randn(n, device=DEVICE)
    _assert_float32_sums(bincount(hot, w, minlength=1000), hot, w, 1000)
    keep = hot < 300  # float64 sums, values past minlength skipped (validate=False)
    assert_close(bincount(hot, w.double(), minlength=300, validate=False), _ref(hot[keep], w[keep], 300),
                 dtype=torch.float64)
    _assert_counts(torch.where(hot < 990, hot, hot + 50), minlength=1000)  # flagged: counted again


def test_bins_past_shared_memory():
    """More bins than the largest shared histogram holds (counts, float64 sums): the atomics; and
    the largest one. (Shared histograms are compiled only: the interpreter, whose counts all take
    the atomics, counts an eighth of the bins.)"""
    s = 1 if BIG else 8
    x = torch.randint(0, 9000 // s, (20000 // s,), device=DEVICE)
    _assert_counts(x, minlength=9000 // s)
    _assert_counts(x[x < 7000 // s], minlength=7000 // s)  # the largest shared histogram
    w = torch.randn(20000 // s, device=DEVICE, dtype=torch.float64)
    keep = x < 5000 // s
    assert_close(bincount(x, w, minlength=5000 // s, validate=False), _ref(x[keep], w[keep], 5000 // s),
                 dtype=torch.float64)


@pytest.mark.parametrize("dtype", INTS)
def test_range_words(dtype):
    """The kernel's (counts, range) against the reference's: the range is (min(values, 0),
    max(values, 0)) as int64, values outside [0, nbins) are never counted (int64 values past
    2**32 included)."""
    lo = torch.iinfo(dtype).min
    cases = [[0, 1, 2, 2], [3, 0, 9], [1, -1, 0], [-5, 7, 1, 2]]
    if dtype == torch.int64:
        cases += [[2**32 + 1, 1, 0], [-2**40, 2], [lo, 2**40 + 2]]
    for vals in cases:
        x = torch.tensor(vals, dtype=torch.int64)
        if (x < torch.iinfo(dtype).min).any() or (x > torch.iinfo(dtype).max).any():
            continue
        x = x.to(dtype).repeat(400).to(DEVICE)  # several tiles and programs
        out, span = bc._bincount_op(x, None, 3, True)
        ref = torch.bincount(x.cpu().long()[(x.cpu() >= 0) & (x.cpu() < 3)], minlength=3)
        assert torch.equal(out.cpu(), ref), (vals, out)
        assert span.tolist() == [min(min(vals), 0), max(max(vals), 0)], (vals, span)
        assert torch.equal(reference_bincount(x.cpu(), None, 3)[1], span.cpu())
    x = torch.tensor([-1, 3, 1], device=DEVICE).to(dtype) if dtype != torch.uint8 else None
    if x is not None:
        with pytest.raises(ValueError, match="input: bincount needs non-negative values, got -1"):
            bincount(x, minlength=2)


@pytest.mark.parametrize("spec", [1, 16, 64])
def test_bins_counted_before_the_maximum(spec, monkeypatch):
    """Without minlength the kernel counts SPEC_BINS bins first: the result is cut to size when
    the maximum lies below them, counted again when it does not; with minlength below the
    maximum, counted again too; weights likewise."""
    monkeypatch.setattr(bc, "SPEC_BINS", spec)
    for top in (0, spec - 1, spec, spec + 1, 3 * spec + 5):
        x = torch.randint(0, top + 1, (700,), device=DEVICE)
        x[123] = top  # the maximum present
        for minlength in (0, 1, top, top + 2):
            out = bincount(x, minlength=minlength)
            assert torch.equal(out.cpu(), _ref(x, minlength=minlength)), (top, minlength)
        w = torch.randn(700, device=DEVICE, dtype=torch.float64)
        assert_close(bincount(x, w), _ref(x, w), dtype=torch.float64)
    with pytest.raises(ValueError, match="got -3"):
        bincount(torch.tensor([4, -3, 2 * spec, -1], device=DEVICE))
