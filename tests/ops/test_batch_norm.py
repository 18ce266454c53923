"""batch_norm against torch.nn.functional.batch_norm in float64: output, running statistics,
dx / dweight / dbias; gradcheck of the reference; layouts; the kernel's modes (fused one-launch,
two launches, one tile or several per program, combine loops) through its tuning knobs; errors."""
import pytest
import torch
import torch.nn.functional as F

from fastpath.ops import batch_norm as bn
from fastpath.ops import batch_norm_kernel as bnk
from fastpath.ops.batch_norm import batch_norm, reference_batch_norm
from tests.conftest import DEVICE, noncontig, randn
from tests.tolerances import assert_close, rel_error

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(67, 13), (4, 5, 7), (1, 7, 13), (3, 6, 5, 7), (2, 3, 1, 1000)]


def _params(C, dtype, affine=True, running=True):
    w = (randn(C) + 1.0).to(dtype) if affine else None
    b = randn(C).to(dtype) if affine else None
    rm = randn(C).to(dtype) if running else None
    rv = (torch.rand(C) + 0.5).to(dtype=dtype, device=DEVICE) if running else None
    return w, b, rm, rv


def _run(x, w, b, rm, rv, training, momentum=0.1, grad=True, param_dtype=None):
    """Ours and PyTorch's (float64 copies): outputs, running stats and gradients compared."""
    f64 = [t.detach().double().requires_grad_(t.requires_grad) if t is not None else None for t in (x, w, b)]
    r64 = [t.detach().double().clone() if t is not None else None for t in (rm, rv)]
    ref = F.batch_norm(f64[0], r64[0], r64[1], f64[1], f64[2], training=training, momentum=momentum, eps=1e-5)
    out = batch_norm(x, rm, rv, w, b, training=training, momentum=momentum)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert_close(out, ref, dtype=x.dtype)
    for mine, theirs in zip((rm, rv), r64):
        if mine is not None:
            assert_close(mine, theirs, dtype=param_dtype or mine.dtype)
    if grad:
        leaves = [t for t in (x, w, b) if t is not None and t.requires_grad]
        refs = [t for t in f64 if t is not None and t.requires_grad]
        g = randn(*x.shape, dtype=x.dtype)
        got = torch.autograd.grad(out, leaves, g)
        want = torch.autograd.grad(ref, refs, g.double())
        for a, r, leaf in zip(got, want, leaves):
            assert a.dtype == leaf.dtype and a.shape == leaf.shape
            assert_close(a, r, dtype=leaf.dtype)
    return out


# Training: float32 and a 16-bit dtype for each shape (float16 and bfloat16 plan alike: in turn);
# inference (the normalising launch, the reduce for dweight / dbias): one dtype a shape, in turn.
@pytest.mark.parametrize("dtype,shape,training", [(dtype, shape, True) for i, shape in enumerate(SHAPES)
                                                  for dtype in (torch.float32, FLOATS[1 + i % 2])]
                         + [(FLOATS[i % 3], shape, False) for i, shape in enumerate(SHAPES)], ids=str)
def test_matches_torch(dtype, shape, training):
    x = (randn(*shape) * 3 + 2).to(dtype).requires_grad_()
    w, b, rm, rv = _params(shape[1], dtype)
    w.requires_grad_()
    b.requires_grad_()
    _run(x, w, b, rm, rv, training)


@pytest.mark.parametrize("training", [True, False])
def test_layouts(training):
    x = randn(3, 6, 5, 7)
    cl = x.to(memory_format=torch.channels_last).requires_grad_()
    out = _run(cl, *_params(6, torch.float32), training)
    assert out.is_contiguous(memory_format=torch.channels_last)  # the input's format is kept
    _run(noncontig(randn(4, 5, 13)).requires_grad_(), *_params(5, torch.float32), training)
    _run(randn(13, 67).t().requires_grad_(), *_params(13, torch.float32), training)  # (N, C) with C-stride 67
    spatial = randn(2, 3, 4, 10)[:, :, :, ::2].requires_grad_()  # spatial dims that do not merge: copied
    _run(spatial, *_params(3, torch.float32), training)
    x5 = randn(2, 4, 3, 5, 6).to(memory_format=torch.channels_last_3d).requires_grad_()
    _run(x5, *_params(4, torch.float32), training)


def test_no_grad_path_updates_running_stats_in_place():
    x = randn(16, 3, 33) * 2 + 5
    w, b, rm, rv = _params(3, torch.float32)
    ids = rm.data_ptr(), rv.data_ptr()
    with torch.no_grad():
        for momentum in (0.1, 0.5):
            _run(x, w, b, rm, rv, True, momentum=momentum, grad=False)
    assert (rm.data_ptr(), rv.data_ptr()) == ids


def test_without_affine_or_running_and_mixed_dtypes():
    x = randn(5, 4, 9).requires_grad_()
    _run(x, None, None, None, None, True)
    _run(x, None, None, *_params(4, torch.float32)[2:], False)
    xh = randn(6, 3, 11, dtype=torch.float16).requires_grad_()
    w, b, rm, rv = _params(3, torch.float32)  # float32 parameters with half input (AMP)
    w.requires_grad_()
    _run(xh, w, b, rm, rv, True, param_dtype=torch.float16)
    wide = torch.stack([randn(3) + 1, randn(3)], 1)  # strided (C,) parameters and running stats
    run = torch.stack([randn(3), torch.rand(3, device=DEVICE) + 0.5], 1)
    _run(randn(6, 3, 11).requires_grad_(), wide[:, 0], wide[:, 1], run[:, 0], run[:, 1], True)
    only_w = randn(3).requires_grad_()
    _run(randn(6, 3, 11), only_w, None, None, None, True)  # only dweight needed


def test_large_mean_small_variance():
    x = randn(64, 3, 50) * 0.01 + 1000.0
    rm, rv = torch.zeros(3, device=DEVICE), torch.zeros(3, device=DEVICE)
    out = batch_norm(x, rm, rv, training=True, momentum=1.0)  # running stats = batch stats
    x64 = x.double()
    ref = F.batch_norm(x64, None, None, training=True)
    assert_close(rm, x64.mean((0, 2)))
    assert_close(rv, x64.var((0, 2)), tol=1e-5)  # sum-of-squares in float32 would lose every digit
    assert_close(out, ref)  # statistics of x - (first value): no cancellation against the mean
    torch32 = rel_error(F.batch_norm(x.cpu(), None, None, training=True), ref)
    assert rel_error(out, ref) <= torch32  # PyTorch's float32 kernel loses ~1e-3 here


@pytest.mark.parametrize("training", [True, False])
def test_gradcheck_float64(training):
    x = torch.randn(4, 3, 5, dtype=torch.float64, device=DEVICE, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64, device=DEVICE, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, device=DEVICE, requires_grad=True)
    rm = torch.randn(3, dtype=torch.float64, device=DEVICE)
    rv = torch.rand(3, dtype=torch.float64, device=DEVICE) + 0.5
    fn = lambda x_, w_, b_: batch_norm(x_, rm.clone(), rv.clone(), w_, b_, training=training)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w, b))


def test_reference_matches_torch():
    x = randn(5, 4, 6)
    rm, rv = torch.zeros(4, device=DEVICE), torch.ones(4, device=DEVICE)
    rm2, rv2 = rm.clone(), rv.clone()
    assert_close(reference_batch_norm(x, rm, rv, training=True), F.batch_norm(x.double(), None, None, training=True))
    F.batch_norm(x, rm2, rv2, training=True)
    assert_close(rm, rm2) and assert_close(rv, rv2)


def test_errors():
    x = randn(4, 3, 5)
    rm, rv = torch.zeros(3, device=DEVICE), torch.ones(3, device=DEVICE)
    with pytest.raises(ValueError, match="input"):
        batch_norm(randn(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match="input"):
        batch_norm(randn(5), None, None, training=True)
    with pytest.raises(TypeError, match="input"):
        batch_norm(torch.ones(4, 3, dtype=torch.int64, device=DEVICE), rm, rv)
    with pytest.raises(ValueError, match="running_mean"):
        batch_norm(x, None, None, training=False)
    with pytest.raises(ValueError, match="running_mean"):
        batch_norm(x, rm, None, training=True)
    with pytest.raises(ValueError, match="weight"):
        batch_norm(x, rm, rv, weight=torch.ones(4, device=DEVICE))
    with pytest.raises(TypeError, match="bias"):
        batch_norm(x, rm, rv, bias=torch.ones(3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError, match="running_var"):
        batch_norm(x, rm, torch.ones(3, 1, device=DEVICE))
    with pytest.raises(TypeError, match="momentum"):
        batch_norm(x, rm, rv, training=True, momentum=None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="large sizes only on a GPU")
@pytest.mark.parametrize("rows", [{"ROWS_2D": False, "ROWS_CL": False}, {"ROWS_2D": True, "ROWS_CL": True},
                                  {"ROWS_2D": True, "ROWS_CL": True, "ROWS_COOP": False},
                                  {"ROWS_2D": True, "ROWS_CL": True, "ROWS_STAGES": 0}])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_large_gpu(knobs, dtype, rows):
    """GPU sizes (the fused single launches, their barriers); ``rows``: the grid-wide plan for the
    channels-last and 2-D inputs, launched cooperatively or not."""
    knobs(**rows)
    x = randn(32, 64, 56, 56, dtype=dtype).requires_grad_()
    w, b, rm, rv = _params(64, torch.float32)
    w.requires_grad_()
    b.requires_grad_()
    _run(x, w, b, rm, rv, True, param_dtype=dtype)
    _run(x.detach().to(memory_format=torch.channels_last).requires_grad_(), w, b, rm, rv, True, param_dtype=dtype)
    for shape in ((8192, 1024), (3001, 4133), (1 << 18, 3)):  # 2-D, grid-wide: one and several channel blocks
        x2 = (randn(*shape, dtype=torch.float32) * 3 + 2).to(dtype).requires_grad_()
        w, b, rm, rv = _params(shape[1], torch.float32)
        _run(x2, w.requires_grad_(), b.requires_grad_(), rm, rv, True, param_dtype=dtype)


def test_compiles_fullgraph():
    x = (randn(4, 3, 9) * 2 + 1).requires_grad_()
    w, b, rm, rv = _params(3, torch.float32)
    w.requires_grad_()
    r64 = [rm.double().clone(), rv.double().clone()]
    fn = torch.compile(lambda t, wt: batch_norm(t, rm, rv, wt, b, training=True), fullgraph=True, backend="aot_eager")
    out = fn(x, w)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = F.batch_norm(x64, r64[0], r64[1], w64, b.double(), training=True)
    assert_close(out, ref)
    assert_close(rm, r64[0]) and assert_close(rv, r64[1])  # the mutation is kept under compile
    g = randn(4, 3, 9)
    for got, want in zip(torch.autograd.grad(out, (x, w), g), torch.autograd.grad(ref, (x64, w64), g.double())):
        assert_close(got, want)


# ---------------------------------------------------------------------------- kernel modes

#: The channels-last reduce launch's grid, small on a GPU too: several chunks a group.
_RED = {"RED_TILE_BYTES": 128, "RED_TILES": 2, "RED_WAVES": 0}
#: The channels-last and 2-D inputs' own plans, not the grid-wide one.
_NO_ROWS = {"ROWS_2D": False, "ROWS_CL": False}
#: Knob sets that force each path of the kernel (in Triton's interpreter a fused group has
#: one chunk: programs run one after another there).
MODES = {
    "fused, chunks of several tiles": {**_NO_ROWS, "FUSED": True, "FUSED_NCHW": True, "FUSED_CL": True,
                                       "FUSED_MAX_TILES": 10**6, "TILE_BYTES_2D": 512, "MAX_BC_2D": 8},
    "fused, one tile in registers": {**_NO_ROWS, "FUSED": True, "FUSED_NCHW": True, "FUSED_CL": True,
                                     "FUSED_MAX_TILES": 10**6, "TILE_BYTES": 1 << 15, "MAX_BS": 1 << 12, "MAX_BC": 64},
    "two launches, one tile a program": {**_NO_ROWS, "FUSED": False, "CHUNK_TILES": 1},
    "two launches, many chunks": {**_NO_ROWS, "FUSED": False, "CHUNK_TILES": 2, "LOOP_TILE_BYTES": 128, "WAVES": 0,
                                  "COMBINE_ELEMS": 64, **_RED},
    "two launches, runs of tiles": {**_NO_ROWS, "FUSED": False, "SPREAD": False, "CHUNK_TILES": 3,
                                    "LOOP_TILE_BYTES": 128, "WAVES": 0, **_RED},
    "two launches, the last chunk combines": {**_NO_ROWS, "FUSED": False, "SPLIT_COMBINE": False, "CHUNK_TILES": 2,
                                              "LOOP_TILE_BYTES": 128, "WAVES": 0, "MAX_BC_TWO": 4, **_RED},
    "two launches, a combine launch over channels": {**_NO_ROWS, "FUSED": False, "SPLIT_COMBINE": True,
                                                     "CHUNK_TILES": 2, "LOOP_TILE_BYTES": 128, "WAVES": 0,
                                                     "MAX_BC_TWO": 16, "COMBINE_BC": 2, "COMBINE_ELEMS": 8, **_RED},
    "grid-wide rows, channel blocks": {"ROWS_2D": True, "ROWS_CL": True, "ROWS_TILE": 16, "ROWS_MAX_BC": 4,
                                       "COMBINE_ELEMS": 8, "ROWS_MIN_FILL": 0},
    "grid-wide rows, whole rows": {"ROWS_2D": True, "ROWS_CL": True, "ROWS_TILE": 256, "ROWS_MAX_BC": 256,
                                   "ROWS_MIN_FILL": 0},
    "grid-wide rows, partials by channel": {"ROWS_2D": True, "ROWS_CL": True, "ROWS_TILE": 16, "ROWS_MAX_BC": 4,
                                            "COMBINE_ELEMS": 8, "ROWS_PART_BY_CHUNK": False, "ROWS_MIN_FILL": 0},
    "grid-wide rows, next tile in registers": {"ROWS_2D": True, "ROWS_CL": True, "ROWS_TILE": 16, "ROWS_MAX_BC": 4,
                                               "COMBINE_ELEMS": 8, "ROWS_STAGES": 0, "ROWS_MIN_FILL": 0},
}


@pytest.fixture
def knobs():
    """configure(mode): the module's knobs as imported, with ``mode`` on top; restored after."""
    saved = bn.knobs()
    yield lambda **mode: bn.configure(**{**saved, **mode})
    bn.configure(**saved)


#: The inputs of test_kernel_modes: NCHW float32 and bfloat16; read as rows of channels, 2-D float32
#: and channels-last bfloat16 (its contiguous gradient takes the NCHW plan); 2-D with as many row
#: tiles as the interpreter's 4 programs (the grid-wide plan's partial last tile a program's only one).
INPUTS = {"nchw": ((3, 5, 7, 9), None, torch.float32), "nchw16": ((3, 4, 33), None, torch.bfloat16),
          "2d": ((70, 20), None, torch.float32), "cl": ((5, 6, 4, 3), "cl", torch.bfloat16),
          "2d13": ((13, 20), None, torch.float32)}
#: (mode, training, inputs). The fused and grid-wide plans are training's (inference takes the
#: two-launch plan); the grid-wide ones are for rows of channels, and so are the last two
#: two-launch modes (NCHW always combines in the last chunk, as "many chunks"). Inference: the
#: two-launch modes' normalising launch and the backward's reduce for dweight / dbias.
MODE_CASES = [
    ("fused, chunks of several tiles", True, "nchw 2d"),
    ("fused, one tile in registers", True, "nchw16 2d cl"),
    ("two launches, one tile a program", True, "nchw nchw16 2d cl"),
    ("two launches, one tile a program", False, "nchw nchw16 2d"),
    ("two launches, many chunks", True, "nchw16 cl"),
    ("two launches, many chunks", False, "nchw16 cl"),
    ("two launches, runs of tiles", True, "nchw nchw16 2d cl"),
    ("two launches, runs of tiles", False, "nchw nchw16 2d"),
    ("two launches, the last chunk combines", True, "2d"),
    ("two launches, the last chunk combines", False, "2d"),
    ("two launches, a combine launch over channels", True, "2d"),
    ("grid-wide rows, channel blocks", True, "2d cl 2d13"),  # 2d13: one tile a program, the last one partial
    ("grid-wide rows, partials by channel", True, "2d cl 2d13"),
    ("grid-wide rows, channel blocks", False, "2d"),  # the two-launch plan; its combine loops, 2 chunks a step
    ("grid-wide rows, whole rows", True, "2d cl"),
    ("grid-wide rows, next tile in registers", True, "2d cl"),
]


@pytest.mark.parametrize("mode,training,inputs", MODE_CASES)
def test_kernel_modes(knobs, mode, training, inputs):
    knobs(**MODES[mode])
    for shape, fmt, dtype in (INPUTS[name] for name in inputs.split()):
        x = randn(*shape) * 3 + 2
        if fmt == "cl":
            x = x.to(memory_format=torch.channels_last)
        w, b, rm, rv = _params(shape[1], dtype)
        _run(x.to(dtype).requires_grad_(), w.requires_grad_(), b.requires_grad_(), rm, rv, training)


def test_plans_pick_the_modes(knobs, monkeypatch):
    """The knob sets above reach the paths they are named for (planned for a one-SM device, so
    that the interpreter and a GPU plan alike)."""
    monkeypatch.setattr(bnk, "num_sms", lambda device: 1)
    knobs(**MODES["fused, one tile in registers"])
    p = bnk._make_plan(3, 5, 63, ((315, 63, 1),) * 3, 4, DEVICE)
    assert p.nchw and p.fused.tpk == 1
    knobs(**MODES["fused, chunks of several tiles"])
    p = bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE)
    assert not p.nchw and p.fused.tpk > 1
    knobs(**MODES["two launches, many chunks"])
    p = bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE)
    assert p.fused is None and p.two.k > p.two.kb  # the combine loops over blocks of chunks
    knobs(**MODES["two launches, the last chunk combines"])
    assert bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE).split is None
    knobs(**MODES["two launches, a combine launch over channels"])
    p = bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE)
    assert p.red.gc == 16 and p.split[0] == 2 and p.red.k > p.split[1]  # wide tiles; the combine loops too


def test_rows_plan(knobs, monkeypatch):
    """The grid-wide plan: 2-D and channels-last training inputs only; at most one program a
    multiprocessor, each with a tile; channel blocks and the combine's share cover C."""
    monkeypatch.setattr(bnk, "num_sms", lambda device: 5)
    knobs(**MODES["grid-wide rows, channel blocks"])
    p = bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE)
    r = p.rows
    assert r.bc == 4 and r.br == 4 and r.programs == 5 and r.cc * r.programs >= 20 and r.kb < r.programs
    assert bnk._make_plan(3, 5, 63, ((315, 63, 1),) * 3, 4, DEVICE).rows is None  # NCHW
    assert bnk._make_plan(3, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE).rows.programs == 1  # one tile of 3 rows
    knobs(**{**MODES["grid-wide rows, channel blocks"], "ROWS_MIN_FILL": 3})  # 18 tiles of 4 rows fill 5 SMs 3 times
    assert bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE).rows.programs == 5
    assert bnk._make_plan(56, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE).rows is None  # 14 tiles
    knobs(**MODES["grid-wide rows, channel blocks"], ROWS_TILE_BYTES=32)  # tiles of 8 float32, 16 bfloat16
    assert bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 4, DEVICE).rows.br == 2
    assert bnk._make_plan(70, 20, 1, ((20, 1, 1),) * 3, 2, DEVICE).rows.br == 4
    knobs(**{**MODES["grid-wide rows, whole rows"], "ROWS_CL": False})
    assert bnk._make_plan(3, 4, 10, ((40, 1, 4),) * 3, 2, DEVICE).rows is None


def test_backward_variants(knobs):
    """Each subset of (dx, dweight, dbias), training and inference: one- and two-launch, and grid-wide
    channel blocks on a 2-D input (the grid-wide plans' case, in training with dx; NCHW inputs,
    inference and the other subsets take the two-launch plan). Next tile in registers: dx, with and
    without dweight; the cooperative launch (a plain one in the interpreter): dx and dweight."""
    every = [(True, False, False), (False, True, False), (False, False, True), (True, True, False)]
    both = [(training, need) for training in (True, False) for need in every]
    for mode, cases in [("fused, chunks of several tiles", both), ("two launches, one tile a program", both),
                        ("grid-wide rows, channel blocks", both),
                        ("grid-wide rows, cooperative", [(True, every[3])]),
                        ("grid-wide rows, next tile in registers", [(True, every[0]), (True, every[3])])]:
        knobs(**MODES[mode.replace("cooperative", "channel blocks")], ROWS_COOP=mode.endswith("cooperative"))
        shape = (37, 6) if mode.startswith("grid-wide") else (4, 3, 11)
        for training, need in cases:
            x = (randn(*shape) * 2 + 1).requires_grad_(need[0])
            w, b, rm, rv = _params(shape[1], torch.float32)
            w.requires_grad_(need[1])
            b.requires_grad_(need[2])
            _run(x, w, b, rm, rv, training)


def test_sums_accurate_at_size(knobs):
    """dweight / dbias are sums over N*H*W values per channel: float32 partials per chunk and
    a tree over chunks stay within float32 tolerance of float64 (bf16 data, 18432 values a
    channel, 9 chunks of 2048)."""
    knobs(LOOP_TILE_BYTES=4096, CHUNK_TILES=1)
    x = randn(8, 3, 48, 48, dtype=torch.bfloat16).requires_grad_()
    w, b, rm, rv = _params(3, torch.float32)
    w.requires_grad_()
    b.requires_grad_()
    _run(x, w, b, rm, rv, True, param_dtype=torch.bfloat16)


def test_large_mean_gradients():
    """x - pivot in the backward too: xhat is not computed against a rounded float32 mean."""
    x = (randn(16, 3, 40) * 0.01 + 1000.0).requires_grad_()
    w, b, _, _ = _params(3, torch.float32)
    w.requires_grad_()
    b.requires_grad_()
    x64 = x.detach().double().requires_grad_()
    w64, b64 = w.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    out = batch_norm(x, None, None, w, b, training=True)
    ref = F.batch_norm(x64, None, None, w64, b64, training=True)
    g = randn(16, 3, 40)
    got = torch.autograd.grad(out, (x, w, b), g)
    want = torch.autograd.grad(ref, (x64, w64, b64), g.double())
    for a, r in zip(got, want):
        assert_close(a, r, tol=1e-5)


def test_mixed_layouts_and_dense_orders():
    """g in another layout than x; a dense permuted x keeps its strides in y."""
    x = (randn(3, 6, 5, 7) * 2).to(memory_format=torch.channels_last).requires_grad_()
    w, b, rm, rv = _params(6, torch.float32)
    out = batch_norm(x, rm, rv, w, b, training=True)
    g = randn(3, 6, 5, 7)  # a contiguous gradient for a channels-last output
    x64 = x.detach().double().requires_grad_()
    ref = F.batch_norm(x64, None, None, w.double(), b.double(), training=True)
    assert_close(torch.autograd.grad(out, x, g)[0], torch.autograd.grad(ref, x64, g.double())[0])
    perm = randn(5, 13, 4).permute(0, 2, 1)  # (N, C=4, L=13) with the channels innermost
    y = _run(perm.requires_grad_(), *_params(4, torch.float32), True)
    assert y.stride() == perm.stride()


def test_configure_rejects_unknown_knob(knobs):
    with pytest.raises(ValueError, match="BLOCK"):
        knobs(BLOCK=4)
