"""The package shell: import without Triton, info(), the CLI, path choice and registration."""
import json
import math
import subprocess
import sys

import pytest
import torch

import fastpath
from fastpath import cli
from fastpath._core import backend
from fastpath._core.errors import normalize_dim, require_fp8


def test_import_without_triton_or_gpu():
    """A fresh interpreter where `import triton` fails still imports fastpath and runs an op."""
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, fastpath\n"
        "r = fastpath.info(file=False)\n"
        "assert r['ops']['softmax']['path'] == 'reference', r\n"
        "assert 'Triton is not importable' in r['ops']['softmax']['why']\n"
        "x = torch.randn(3, 5)\n"
        "assert torch.allclose(fastpath.softmax(x), torch.softmax(x, -1))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_info_report(capsys):
    r = fastpath.info()
    text = capsys.readouterr().out
    assert r["torch"] == torch.__version__ and r["torch"] in text
    assert set(r["ops"]) >= {"softmax", "sampling"}
    for fam in r["ops"].values():
        assert fam["path"] in ("triton", "reference") and fam["why"]
    expect = "triton" if backend.triton_reason(backend.default_device()) is None else "reference"
    assert r["ops"]["softmax"]["path"] == expect
    if not torch.cuda.is_available():  # no CUDA device: plain launches, and the report says why
        assert r["pdl"] in ("Triton's interpreter", "no Triton kernels on this device") and r["pdl"] in text


def test_info_reference_on_meta_device():
    """A device the kernels cannot serve is reported as the reference path, with the reason."""
    r = fastpath.info("meta", file=False)
    assert r["ops"]["softmax"]["path"] == "reference"
    assert "meta" in r["ops"]["softmax"]["why"]


def test_cli_info_json(capsys):
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["python"].count(".") == 2 and "ops" in data


def test_cli_usage(capsys):
    assert cli.main([]) == 2
    assert "info" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["nonsense"])
    assert e.value.code == 2


def test_dim_errors_name_the_argument():
    assert normalize_dim("dim", -1, 3) == 2 and normalize_dim("dim", 0, 0) == 0
    with pytest.raises(IndexError, match=r"dim: expected a dimension in \[-3, 2\] for a 3-D input, got 3"):
        normalize_dim("dim", 3, 3)
    with pytest.raises(TypeError, match="dim: expected an int"):
        normalize_dim("dim", 1.0, 3)


def test_require_fp8(monkeypatch):
    require_fp8()  # this torch has float8
    monkeypatch.delattr(torch, "float8_e4m3fn")
    with pytest.raises(RuntimeError, match="float8_e4m3fn"):
        require_fp8()


def test_missing_triton_kernel_refuses_to_launch():
    stub = backend._MissingTriton("ImportError: no triton")

    @stub.jit
    def k(x):
        pass

    with pytest.raises(RuntimeError, match="needs Triton"):
        k[(1,)](1)


# ---------------------------------------------------------------------------- Launcher

class _FakeParam:
    def __init__(self, name, default=None, has_default=False):
        self.name, self.default, self.has_default = name, default, has_default
        self.is_constexpr = name.isupper()  # as the fakes name them


class _FakeKernel:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        return lambda *args, stream=None: self.log.append(("fast", grid, args, stream))


class _FakeJit:
    """Stands in for a compiled JITFunction: records slow launches, returns a kernel."""
    params = [_FakeParam(n) for n in ("x_ptr", "n", "scale", "BLOCK")]
    kernel = _FakeKernel

    def __init__(self):
        self.log, self.compiles = [], 0

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.compiles += 1
            self.log.append(("slow", grid, args, kwargs))
            return self.kernel(self.log)
        return run


def _fast_launch(monkeypatch):
    """The launch module with the cached relaunch on, as on a GPU (device 0, a fake stream)."""
    from fastpath._core import launch
    monkeypatch.setattr(launch, "INTERPRET", False)
    monkeypatch.setattr(launch, "FAST_LAUNCH", True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "_raw_stream", lambda dev: 1234)
    return launch


def test_launcher_reuses_a_compiled_kernel_only_for_the_same_specialisation(monkeypatch):
    launch = _fast_launch(monkeypatch)
    fake = _FakeJit()
    fast = launch.Launcher(fake)
    x = torch.zeros(64)
    fast[(3,)](x, 32, 0.5, BLOCK=16, num_warps=4)
    fast[(5,)](x, 48, 0.25, BLOCK=16, num_warps=4)  # same specialisation: straight to the kernel
    assert fake.compiles == 1
    assert fake.log[-1] == ("fast", (5, 1, 1), (x, 48, 0.25, 16), 1234)  # every parameter, in order
    fast[(5,)](x, 7, 0.25, BLOCK=16, num_warps=4)  # 7 is not divisible by 16: Triton's choice may differ
    fast[(5,)](x, 1, 0.25, BLOCK=16, num_warps=4)  # equal to 1
    fast[(5,)](x[1:], 48, 0.25, BLOCK=16, num_warps=4)  # 4-byte aligned data pointer
    fast[(5,)](x.double(), 48, 0.25, BLOCK=16, num_warps=4)  # another dtype
    fast[(5,)](x, 48, 0.25, BLOCK=32, num_warps=4)  # another constexpr
    fast[(5,)](x, 48, 0.25, BLOCK=16, num_warps=8)  # another option
    fast[(5,)](x, 2**40, 0.25, BLOCK=16, num_warps=4)  # a 64-bit integer
    assert fake.compiles == 8
    monkeypatch.setattr(launch, "FAST_LAUNCH", False)
    fast[(5,)](x, 48, 0.25, BLOCK=16, num_warps=4)  # switched off: Triton's own path
    assert fake.compiles == 9


class _FakeCompiled(_FakeKernel):
    """A compiled kernel as Triton 3.x's CompiledKernel exposes it: ``run`` takes the grid, the
    stream, the function, its packed metadata, the launch metadata and hooks, then the args."""
    function, packed_metadata = "fn-handle", ("packed",)

    def run(self, *a):
        self.log.append(("direct",) + a)


class _FakeCompilingJit(_FakeJit):
    kernel = _FakeCompiled


def test_launcher_relaunch_calls_the_compiled_kernels_run_directly(monkeypatch):
    """Where the compiled kernel has Triton's ``run``, a relaunch calls it with the full grid,
    the stream, the kernel's function and packed metadata, no launch metadata or hooks, and
    every parameter in order."""
    launch = _fast_launch(monkeypatch)
    fake = _FakeCompilingJit()
    fast = launch.Launcher(fake)
    x = torch.zeros(64)
    fast[(3,)](x, 32, 0.5, BLOCK=16)
    fast[(5, 2)](x, 48, 0.25, BLOCK=16)
    assert fake.compiles == 1
    assert fake.log[-1] == ("direct", 5, 2, 1, 1234, "fn-handle", ("packed",), None, None, None, x, 48, 0.25, 16)


class OutOfResources(Exception):
    """Named as Triton's (triton.runtime.errors.OutOfResources), which the Launcher matches by name."""


class _FakeSmemJit(_FakeJit):
    """A kernel that needs more shared memory than the GPU gives at more than ``fits`` pipeline
    stages (Triton's default 3 when the launch names none)."""

    def __init__(self, fits, error=OutOfResources):
        super().__init__()
        self.fits, self.error, self.tries = fits, error, []

    def __getitem__(self, grid):
        run = super().__getitem__(grid)

        def check(*args, **kwargs):
            self.tries.append(kwargs.get("num_stages"))
            if (kwargs.get("num_stages") or 3) > self.fits:
                raise self.error("out of resource: shared memory, Required: 172032, Hardware limit: 101376")
            return run(*args, **kwargs)
        return check


@pytest.mark.parametrize("fast", [False, True])
def test_launcher_takes_fewer_stages_where_shared_memory_is_short(monkeypatch, fast):
    """A launch past the GPU's shared memory (plans tuned on an H200 run on a 99 KB RTX 4090) is
    compiled again with fewer pipeline stages, down to one; the limit is kept for that
    specialisation (the next call goes straight to it), not for another; other errors still
    raise, and a kernel that does not fit at one stage raises an error naming it."""
    from fastpath._core import launch
    if fast:
        launch = _fast_launch(monkeypatch)
    else:  # Triton's own path every call (on a GPU host the cached relaunch is on by default)
        monkeypatch.setattr(launch, "FAST_LAUNCH", False)
    x = torch.zeros(64)
    fake = _FakeSmemJit(fits=1)
    k = launch.Launcher(fake)
    k[(2,)](x, 32, 0.5, BLOCK=16)
    assert fake.tries == [None, 2, 1] and fake.log[-1][3]["num_stages"] == 1
    k[(2,)](x, 48, 0.5, BLOCK=16)  # the same specialisation: at one stage at once (or the cached kernel)
    assert fake.tries == [None, 2, 1] + ([] if fast else [1])
    k[(2,)](x.double(), 32, 0.5, BLOCK=16, num_stages=2)  # another dtype: from its own stages
    assert fake.tries[-2:] == [2, 1]
    assert launch.Launcher(_FakeSmemJit(fits=3))[(2,)](x, 32, 0.5, BLOCK=16) is not None  # fits: one try
    with pytest.raises(RuntimeError, match="even at one pipeline stage .*Hardware limit: 101376"):
        launch.Launcher(_FakeSmemJit(fits=0))[(2,)](x, 32, 0.5, BLOCK=16)
    other = _FakeSmemJit(fits=1, error=ValueError)
    with pytest.raises(ValueError):
        launch.Launcher(other)[(2,)](x, 32, 0.5, BLOCK=16)
    assert other.tries == [None]


class _FakeDefaultsJit(_FakeJit):
    params = [_FakeParam("x_ptr"), _FakeParam("n"), _FakeParam("eps", 0.0, True), _FakeParam("BLOCK"),
              _FakeParam("MODE", 0, True)]


def test_launcher_relaunch_fills_in_default_arguments(monkeypatch):
    """Arguments a call leaves out reach the cached kernel as the kernel's defaults (every
    parameter, in order), as Triton binds them on the first call."""
    launch = _fast_launch(monkeypatch)
    fake = _FakeDefaultsJit()
    fast = launch.Launcher(fake)
    x = torch.zeros(64)
    for _ in range(2):
        fast[(2,)](x, 32, BLOCK=16)
    assert fake.compiles == 1
    assert fake.log[-1] == ("fast", (2, 1, 1), (x, 32, 0.0, 16, 0), 1234)
    for _ in range(2):
        fast[(2,)](x, 32, BLOCK=16, eps=0.5, MODE=1)
    assert fake.log[-1] == ("fast", (2, 1, 1), (x, 32, 0.5, 16, 1), 1234)


def test_launcher_keys_runtime_arguments_by_name_on_their_specialisation(monkeypatch):
    """A tensor or number passed by name is keyed as Triton specialises it, not by identity or
    value: a fresh tensor of the same dtype and alignment reuses the kernel (and reaches it),
    another dtype compiles; a constexpr by name is keyed by its value."""
    launch = _fast_launch(monkeypatch)
    fake = _FakeJit()
    fast = launch.Launcher(fake)
    for n in (32, 48):
        y = torch.zeros(64)
        fast[(1,)](x_ptr=y, n=n, scale=0.5 * n, BLOCK=16)
    assert fake.compiles == 1 and len(fast.kernels) == 1
    assert fake.log[-1] == ("fast", (1, 1, 1), (y, 48, 24.0, 16), 1234)
    fast[(1,)](x_ptr=y.double(), n=48, scale=0.5, BLOCK=16)
    fast[(1,)](x_ptr=y, n=48, scale=0.5, BLOCK=32)
    assert fake.compiles == 3


class _FakePdlJit(_FakeJit):
    params = [_FakeParam(n) for n in ("x_ptr", "n", "BLOCK", "PDL")]


@pytest.mark.parametrize("mode,cap,hip,late,expect", [
    (1, (9, 0), None, True, 1), (2, (10, 0), None, True, 2), (1, (8, 9), None, True, 0), (0, (9, 0), None, True, 0),
    (1, (9, 0), "6.2", True, 0), (3, (9, 0), None, True, 3), (3, (9, 0), None, False, 1), (3, (8, 9), None, True, 0)])
def test_pdl_launch_only_where_the_gpu_has_it(monkeypatch, mode, cap, hip, late, expect):
    """``Launcher(fn, pdl=True)``: PDL=mode and launch_pdl on NVIDIA capability 9.0+, PDL=0 and
    a plain launch elsewhere (older GPUs, ROCm, FASTPATH_PDL=0); mode 3 only for kernels of the
    modules PDL_LATE names (mode 1 for the others); the fast relaunch passes the same PDL value
    as the first, compiling launch."""
    from fastpath._core import backend, launch
    monkeypatch.setattr(launch, "INTERPRET", False)
    monkeypatch.setattr(backend, "INTERPRET", False)
    monkeypatch.setattr(launch, "FAST_LAUNCH", True)
    monkeypatch.setattr(backend, "PDL", mode)
    monkeypatch.setattr(backend, "PDL_LATE", frozenset({"test_core"} if late else {"matvec"}))
    monkeypatch.setattr(backend, "capability", lambda index: cap)
    monkeypatch.setattr(backend, "triton_reason", lambda device: None)
    monkeypatch.setattr(torch.version, "hip", hip)
    backend.pdl_on.cache_clear()
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "_raw_stream", lambda dev: 1234)
    fake = _FakePdlJit()
    fast = launch.Launcher(fake, pdl=True)
    x = torch.zeros(64)
    try:
        fast[(3,)](x, 32, BLOCK=16)
        fast[(3,)](x, 32, BLOCK=16)
    finally:
        backend.pdl_on.cache_clear()
    (_, _, _, kwargs), fast_call = fake.log
    assert kwargs["PDL"] == expect and kwargs.get("launch_pdl", False) == (expect > 0)
    assert fast_call == ("fast", (3, 1, 1), (x, 32, 16, expect), 1234)
    plain = launch.Launcher(_FakeJit())  # without pdl=True nothing is added
    plain[(1,)](x, 32, 0.5, BLOCK=16)
    assert "PDL" not in plain.fn.log[0][3] and "launch_pdl" not in plain.fn.log[0][3]


@pytest.mark.parametrize("mode,cap,hip,expect", [(1, (9, 0), None, None), (2, (10, 0), None, None),
                                                 (1, (8, 9), None, "needs compute capability 9.0+, this GPU has 8.9"),
                                                 (0, (9, 0), None, "FASTPATH_PDL=0"),
                                                 (1, (9, 0), "6.2", "ROCm has no programmatic dependent launch")])
def test_pdl_reason_for_info(monkeypatch, mode, cap, hip, expect):
    monkeypatch.setattr(backend, "INTERPRET", False)
    monkeypatch.setattr(backend, "triton_reason", lambda device: None)
    monkeypatch.setattr(backend, "PDL", mode)
    monkeypatch.setattr(backend, "capability", lambda index: cap)
    monkeypatch.setattr(torch.version, "hip", hip)
    assert backend.pdl_reason("cuda:0") == expect


def test_pdl_mode_from_the_environment():
    from fastpath._core.backend import _pdl_mode
    assert [_pdl_mode(v) for v in ("0", "1", "2", " 2 ", "3", "no", "Yes", "")] == [0, 1, 2, 2, 3, 0, 1, 0]
    with pytest.raises(ValueError, match="FASTPATH_PDL: expected 0, 1, 2 or 3, got '4'"):
        _pdl_mode("4")


def test_workspace_outlives_inference_mode():
    """A workspace first allocated under torch.inference_mode (a decode) is a normal tensor:
    later calls outside it may write it in place (tests poison them)."""
    from fastpath._core.launch import workspace
    with torch.inference_mode():
        w = workspace(torch.device("cpu"), "test.inference", 8, torch.float32)
    assert not w.is_inference()
    assert workspace(torch.device("cpu"), "test.inference", 4, torch.float32) is w
    w.fill_(1.0)


@pytest.mark.parametrize("cap,hip,importable,expect", [((9, 0), None, True, True), ((8, 9), None, True, False),
                                                       ((9, 0), "6.2", True, False), ((10, 0), None, False, False)])
def test_tma_capable(monkeypatch, cap, hip, importable, expect):
    """Tensor descriptors only on NVIDIA capability 9.0+ with a Triton that has them."""
    import builtins

    from fastpath._core import backend
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "triton.tools.tensor_descriptor" and not importable:
            raise ImportError(name)
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(backend, "capability", lambda index: cap)
    monkeypatch.setattr(torch.version, "hip", hip)
    backend.tma_capable.cache_clear()
    try:
        assert backend.tma_capable(0) is expect
    finally:
        backend.tma_capable.cache_clear()


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((1, 64), (2, 1, 1, 64)), ((), (4, 1)), ((5, 1, 3), (4, 1)),
                                    ((0, 3), (1, 3)), ((3,), (2, 3), (4, 1, 1)), ((2, 3), (3, 2)), ((0,), (2,))])
def test_broadcast_shape_matches_torch(shapes):
    """The plain-Python broadcast agrees with torch.broadcast_shapes, errors included."""
    from fastpath._core.shapes import broadcast_pair, broadcast_shape
    try:
        want = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        with pytest.raises(RuntimeError):
            broadcast_shape(*shapes)
        return
    assert broadcast_shape(*shapes) == want
    if len(shapes) == 2:
        a, b = torch.zeros(shapes[0]), torch.arange(float(math.prod(shapes[1]))).reshape(shapes[1])
        for got, ref in zip(broadcast_pair(a, b), torch.broadcast_tensors(a, b)):
            assert got.shape == ref.shape and got.stride() == ref.stride() and torch.equal(got, ref)


@pytest.mark.launch_memo
def test_launch_memo_replays_with_the_new_pointers(monkeypatch):
    """An eager call with the tensor properties of a recorded one replays its launches: the
    same kernel, grid and constants, the new inputs' and a new output's pointers, a cached
    workspace as it was; calls that differ in a property, or whose launch cannot be replayed,
    take the op's path."""
    from fastpath._core import memo as M
    launch = _fast_launch(monkeypatch)
    fake = _FakeCompilingJit()
    fake.params = [_FakeParam(n) for n in ("x_ptr", "w_ptr", "o_ptr", "ws_ptr", "n", "BLOCK")]
    fast = launch.Launcher(fake)
    ws = launch.workspace(torch.device("cpu"), "test.memo", 8, torch.float32)
    path_calls = []

    def op(x, w, tmp=False):
        path_calls.append(1)
        out = torch.empty(x.shape[0], w.shape[0])
        fast[(2,)](x, torch.empty(4) if tmp else w, out, ws, x.shape[0], BLOCK=16)
        return out

    memo = M.LaunchMemo()
    memo.device_types = ("cpu",)
    x1, x2, w = torch.randn(3, 4), torch.randn(3, 4), torch.randn(5, 4)
    memo.call(lambda: op(x1, w), (x1, w))
    out = memo.call(lambda: op(x2, w), (x2, w))
    assert len(path_calls) == 1  # the second call was a replay
    assert out.shape == (3, 5) and out.dtype == torch.float32
    assert fake.log[-1] == ("direct", 2, 1, 1, 1234, "fn-handle", ("packed",), None, None, None,
                            x2.data_ptr(), w.data_ptr(), out.data_ptr(), ws.data_ptr(), 3, 16)
    memo.call(lambda: op(x2[:2], w), (x2[:2], w))  # another shape: the op's path, recorded
    assert len(path_calls) == 2
    memo.call(lambda: op(x2[:2], w), (x2[:2], w))
    assert len(path_calls) == 2
    x3 = torch.randn(3, 4).requires_grad_()
    memo.call(lambda: op(x3, w), (x3, w))  # autograd must see it
    assert len(path_calls) == 3
    y = torch.randn(1, 4)  # (a shape not recorded yet)
    for _ in range(2):  # a temporary tensor among the arguments: never replayed
        memo.call(lambda: op(y, w, tmp=True), (y, w))
    assert len(path_calls) == 5


@pytest.mark.launch_memo
def test_tuning_knobs_clear_the_launch_memo(monkeypatch):
    """A knob set through ``fastpath.bench.harness.knobs`` (how the tuning scripts try variants) reaches
    the next call: the memo forgets its recorded calls on entering and leaving, so the op's path runs
    with the knob's value instead of a replay of what the earlier value launched."""
    import types

    from fastpath._core import memo as M
    from fastpath.bench.harness import knobs
    launch = _fast_launch(monkeypatch)
    fake = _FakeCompilingJit()
    fake.params = [_FakeParam(n) for n in ("x_ptr", "o_ptr", "BLOCK")]
    fast = launch.Launcher(fake)
    mod = types.SimpleNamespace(BLOCK=16)

    def op(x):
        out = torch.empty_like(x)
        fast[(1,)](x, out, BLOCK=mod.BLOCK)
        return out

    def last_block():  # BLOCK of the last launch: a compiling launch's keyword, a direct one's last argument
        entry = fake.log[-1]
        return entry[-1]["BLOCK"] if entry[0] == "slow" else entry[-1]

    memo = M.LaunchMemo()
    memo.device_types = ("cpu",)
    x = torch.randn(8)
    for _ in range(2):
        memo.call(lambda: op(x), (x,))
    assert last_block() == 16 and fake.log[-1][0] == "direct" and memo.entries
    with knobs(mod, BLOCK=32):
        assert not memo.entries
        memo.call(lambda: op(x), (x,))
        assert last_block() == 32  # a replay would have launched BLOCK=16 again
    assert mod.BLOCK == 16 and not memo.entries
    memo.call(lambda: op(x), (x,))
    assert last_block() == 16


@pytest.mark.launch_memo
def test_launch_memo_replays_tensor_descriptors(monkeypatch):
    """A tensor descriptor on one of the call's tensors is made again on the new tensor at each
    replay (same shape, strides, block, padding, and class); one on a temporary is not replayable."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from fastpath._core import memo as M
    launch = _fast_launch(monkeypatch)
    fake = _FakeCompilingJit()
    fake.params = [_FakeParam(n) for n in ("x_desc", "o_ptr", "BLOCK")]
    fast = launch.Launcher(fake)
    path_calls = []

    def op(x, tmp=False):
        path_calls.append(1)
        out = torch.empty(x.shape[0])
        base = x.clone() if tmp else x
        fast[(1,)](TensorDescriptor(base, list(base.shape), list(base.stride()), [8, 16], "nan"), out, BLOCK=16)
        return out

    memo = M.LaunchMemo()
    memo.device_types = ("cpu",)
    x1, x2 = torch.randn(32, 16), torch.randn(32, 16)
    memo.call(lambda: op(x1), (x1,))
    out = memo.call(lambda: op(x2), (x2,))
    assert len(path_calls) == 1
    desc = fake.log[-1][10]
    assert type(desc) is TensorDescriptor and desc.base is x2 and fake.log[-1][11] == out.data_ptr()
    assert (list(desc.shape), list(desc.strides), list(desc.block_shape), desc.padding) == ([32, 16], [16, 1],
                                                                                             [8, 16], "nan")
    y = torch.randn(8, 16)
    for _ in range(2):
        memo.call(lambda: op(y, tmp=True), (y,))
    assert len(path_calls) == 3


@pytest.mark.launch_memo
def test_launch_memo_replays_tuples_of_outputs(monkeypatch):
    """An op returning several new tensors (one permuted, dense; one empty; a None) replays
    with new outputs of the same shapes, strides and dtypes, each launch getting their pointers."""
    from fastpath._core import memo as M
    launch = _fast_launch(monkeypatch)
    fake = _FakeCompilingJit()
    fake.params = [_FakeParam(n) for n in ("x_ptr", "y_ptr", "s_ptr", "n")]
    fast = launch.Launcher(fake)
    path_calls = []

    def op(x):
        path_calls.append(1)
        y = torch.empty(2, 4, 3).permute(0, 2, 1)  # channels-last-like: dense, not contiguous
        stats = torch.empty(4, dtype=torch.float64)
        fast[(1,)](x, y, stats, x.numel())
        fast[(2,)](y, stats, stats, 7)
        return y, stats, torch.empty(0), None

    memo = M.LaunchMemo()
    memo.device_types = ("cpu",)
    x0 = torch.randn(2, 3, 4)
    memo.call(lambda: op(x0), (x0,))
    x = torch.randn(2, 3, 4)
    y, stats, empty, none = memo.call(lambda: op(x), (x,))
    assert len(path_calls) == 1
    assert y.shape == (2, 3, 4) and y.stride() == (12, 1, 3) and stats.dtype == torch.float64
    assert empty.shape == (0,) and none is None
    assert fake.log[-2][-4:] == (x.data_ptr(), y.data_ptr(), stats.data_ptr(), 24)
    assert fake.log[-1][-4:] == (y.data_ptr(), stats.data_ptr(), stats.data_ptr(), 7)


def test_launch_memo_template_refuses_what_it_cannot_replay():
    from fastpath._core import memo as M
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    out = torch.empty(3, 5)
    rec = ("run", "fn", "meta", (1, 1, 1), (x, w, out, 7))
    assert M.LaunchMemo.template([rec], (x, w), out, 0) is not None
    assert M.LaunchMemo.template([], (x, w), out, 0) is None  # nothing launched
    assert M.LaunchMemo.template([rec, None], (x, w), out, 0) is None  # a launch Triton made itself
    assert M.LaunchMemo.template([rec], (x, w), x, 0) is None  # the output is an input
    big = torch.empty(4, 5)
    assert M.LaunchMemo.template([("run", "fn", "meta", (1, 1, 1), (x, w, big[:3]))], (x, w), big[:3], 0) is None
    class Desc:  # as triton.tools.tensor_descriptor.TensorDescriptor: a base tensor of its own
        base = x
    desc = ("run", "fn", "meta", (1, 1, 1), (x, w, out, Desc()))
    assert M.LaunchMemo.template([desc], (x, w), out, 0) is None
    view = x[1:]  # a view at an offset is not one of the call's tensors
    assert M.LaunchMemo.template([("run", "fn", "meta", (1, 1, 1), (view, w, out))], (x, w), out, 0) is None
    assert M.LaunchMemo.template([rec], (x, w), (out, x), 0) is None  # an output that is an input
    wide = torch.empty(3, 10)[:, :5]  # an output with gaps: a replay would allocate another layout
    assert M.LaunchMemo.template([("run", "fn", "meta", (1, 1, 1), (x, w, wide))], (x, w), wide, 0) is None
    assert M.LaunchMemo.template([rec], (x, w), [out], 0) is None  # a list: not what the op returns
    # an output no launch takes (a torch op made it, as a broadcast solve's info): not replayable
    assert M.LaunchMemo.template([rec], (x, w), (out, torch.empty(2)), 0) is None
    assert M.LaunchMemo.template([rec], (x, w), (out, torch.empty(0), None), 0) is not None  # empty: nothing to write
    # an empty temporary as an argument (a null pointer, as dropout's mask when none is kept): the same every call
    nul = torch.empty(0)
    assert nul.data_ptr() == 0
    assert M.LaunchMemo.template([("run", "fn", "meta", (1, 1, 1), (x, w, out, nul))], (x, w), out, 0) is not None


def test_launch_memo_records_only_its_own_thread(monkeypatch):
    """A launch from another thread never enters the record of a call being recorded."""
    import threading
    launch = _fast_launch(monkeypatch)
    fake = _FakeCompilingJit()
    fast = launch.Launcher(fake)
    x = torch.zeros(64)
    fast[(1,)](x, 32, 0.5, BLOCK=16)
    launch.RECORDING.records = mine = []
    try:
        other = threading.Thread(target=lambda: fast[(1,)](x, 32, 0.5, BLOCK=16))
        other.start()
        other.join()
        assert mine == []
        fast[(1,)](x, 32, 0.5, BLOCK=16)
        assert len(mine) == 1 and mine[0][3] == (1, 1, 1)
    finally:
        launch.RECORDING.records = None


@pytest.mark.launch_memo
def test_launch_memo_leaves_bad_arguments_to_the_op(monkeypatch):
    """A non-tensor argument reaches the op's own checks (their error), never the memo's key."""
    from fastpath._core import memo as M
    _fast_launch(monkeypatch)
    m = M.LaunchMemo()
    m.device_types = ("cpu",)

    def op():
        raise TypeError("x: expected a tensor")
    with pytest.raises(TypeError, match="x: expected a tensor"):
        m.call(op, ([1.0, 2.0], torch.zeros(2)))
    assert m.entries == {}


def test_rel_error_counts_imaginary_parts():
    """The tests' comparison of complex results: an error only in the imaginary parts counts (a
    float64 cast would drop them), and a complex result matches itself within the table."""
    from tests.tolerances import assert_close, rel_error
    a = torch.randn(7, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    b = a.clone()
    b.imag += 0.1
    assert rel_error(b, a) > 0.01
    with pytest.raises(AssertionError, match="relative error"):
        assert_close(b, a)
    assert_close(a.clone(), a)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="page-locked reads need a CUDA device")
def test_read_back_waits_for_the_stream():
    """The validating calls' read (bincount's range, take's error word) through page-locked
    words: each read sees the value a long kernel wrote just before it on the stream."""
    from fastpath._core import readback
    big = torch.ones(1 << 24, device="cuda")
    for dtype in (torch.int64, torch.int32, torch.float32):
        t = torch.zeros(3, dtype=dtype, device="cuda")
        for k in range(1, 4):
            t.copy_(torch.arange(3, device="cuda") + big.sum().to(torch.int64) // (1 << 24) * k)
            assert readback.read_back(t) == [k + i for i in range(3)]
