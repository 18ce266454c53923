"""Test harness: Triton kernels run compiled on a GPU, or in Triton's interpreter on the CPU.

``TRITON_INTERPRET=1`` must be set before ``triton`` is imported, so it is set here, at
collection, before any fastpath module loads. With it set, fastpath's public functions
take their Triton path on CPU tensors, so the tests exercise the public API.
"""
import contextlib
import os
import zlib

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

if os.environ.get("FASTPATH_BOUNDS", "1") == "1" and os.environ.get("TRITON_INTERPRET") == "1":
    from tests.bounds import install as _install_bounds  # every access of every interpreted kernel checked
    _install_bounds()

from fastpath._core import alloc, memo  # noqa: E402
from fastpath.ops.linalg import lu as linalg_lu  # noqa: E402


class _NoPatch:
    def restore(self) -> None:
        pass


def _patch_language_once() -> None:
    """Triton's interpreter patches ``triton.language`` (``inspect.getmembers`` over four modules,
    ~0.4 ms) at every kernel launch and again at every call of a ``@triton.jit`` helper inside a
    kernel, and undoes the launch's patch when the kernel returns; a helper's patch inside a
    patched launch changes nothing (the builtins are already replaced; the rest is set again to
    the same behaviour). A quarter of some tests' time went there (the LU row panel's helpers in
    its column loop, batch_norm's many small launches). In the test process everything Triton
    runs is interpreted (the sm_90 compile test runs in a subprocess), so here the language
    modules stay patched once a launch or helper has patched them, and later patches of modules
    already patched are skipped; another Triton whose internals differ takes its own path."""
    try:
        from triton.runtime import interpreter as interp
        original, lang = interp._patch_lang, interp.tl
        cores = (lang, lang.core)
    except (ImportError, AttributeError):
        return
    patched: set = set()  # ids of the language modules patched for the rest of the process
    seen: dict = {}

    def modules(fn) -> frozenset:
        g = fn.__globals__
        mods = seen.get(id(g))
        if mods is None:
            mods = seen[id(g)] = frozenset(id(v) for v in list(g.values()) if any(v is c for c in cores))
        return mods

    def patch_lang(fn):
        mods = modules(fn)
        if not mods <= patched:
            original(fn)  # its scope is dropped: never undone
            patched.update(mods)
        return _NoPatch()

    interp._patch_lang = patch_lang


if os.environ.get("TRITON_INTERPRET") == "1":
    _patch_language_once()

#: Most pytest-xdist workers ``-n auto`` starts (each imports torch, transformers and diffusers).
MAX_WORKERS = 4


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown without it
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core, at most MAX_WORKERS."""
    return max(1, min(_cores(), MAX_WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With pytest-xdist installed (the ``test`` extra) and no ``-n`` given, run as ``-n auto``,
    tests handed out by work stealing (a worker that runs out takes queued tests from the other,
    so minute-long interpreter tests near the end do not leave a core idle); ``-n 0`` runs in
    one process, and without xdist the suite runs in one process as it is."""
    if (getattr(config.option, "numprocesses", 0) is None and config.pluginmanager.hasplugin("xdist")
            and not os.environ.get("PYTEST_XDIST_WORKER")):
        config.option.numprocesses = "auto"
        if getattr(config.option, "dist", "no") == "no":
            config.option.dist = "worksteal"


#: Tests of a minute or more in the interpreter (clean-clone CI, two cores): run first, so that none
#: of them is the last test of a worker while the other worker has finished (xdist hands tests out
#: in collection order).
SLOW_FIRST = ("tests/test_compile_sm90.py::", "tests/ops/test_linalg_lu.py::test_lu_singular_blocked",
              "tests/ops/test_linalg_lu.py::test_lu_blocked_steps")


def pytest_collection_modifyitems(config, items):
    """The tests named in SLOW_FIRST first, each group in its collection order."""
    rank = {p: i for i, p in enumerate(SLOW_FIRST)}

    def key(item):
        return next((rank[p] for p in SLOW_FIRST if item.nodeid.startswith(p)), len(SLOW_FIRST))
    items.sort(key=key)  # (stable: the rest keep their order)


# Each xdist worker's torch gets its share of the cores: OpenMP threads of two workers spinning
# on the same cores slow both.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    torch.set_num_threads(max(1, _cores() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

#: Sizes that are not powers of two, for every reduced or tiled dimension.
AWKWARD = [1, 7, 13, 67, 1000]
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _seed_and_poison(request):
    """Seed every test from its own name, and fill every output fastpath allocates with NaN; the
    linear algebra's kernels on every shape they serve (not torch's where it was measured faster)."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    alloc.POISON = True
    enabled, routed = memo.ENABLED, linalg_lu.ROUTE_BY_SPEED
    memo.ENABLED = "launch_memo" in request.keywords  # tests change knobs a replay would not see
    linalg_lu.ROUTE_BY_SPEED = "route_by_speed" in request.keywords
    yield
    alloc.POISON = False
    memo.ENABLED, linalg_lu.ROUTE_BY_SPEED = enabled, routed


def run_as_user(code: str, timeout: int = 900):
    """``python -c code`` in a child process without Triton's interpreter (the ops' reference
    paths on a CPU, as a user would run them), fastpath from this checkout's ``src``."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.join(root, "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=root)


def noncontig(x: torch.Tensor) -> torch.Tensor:
    """The same values as ``x`` in a non-contiguous view (every other column of a wider buffer)."""
    wide = torch.empty(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    wide.fill_(float("nan") if x.dtype.is_floating_point else 0)
    view = wide[..., ::2]
    view.copy_(x)
    return view


def randn(*shape, dtype=torch.float32, device=DEVICE, scale=1.0):
    """Fresh normal data (never zeros), generated in float32 on the CPU then moved."""
    return (torch.randn(shape) * scale).to(dtype=dtype, device=device)


@pytest.fixture
def reference_paths(monkeypatch):
    """fastpath's PyTorch reference paths where the kernels would run in Triton's interpreter
    (whole-model loops are too slow there); compiled kernels on a GPU."""
    if DEVICE.type == "cpu":
        from fastpath._core import backend
        monkeypatch.setattr(backend, "DISABLED", True)


def greedy_hf(model, ids, n):
    """``n`` greedy tokens of a transformers model after the prompt ``ids`` (every position attended)."""
    x = torch.tensor([ids])
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, pad_token_id=0)
    return out[0, len(ids):].tolist()


def greedy_ours_cpu(path, ids, n, default_device=None):
    """``n`` greedy tokens of fastpath's engine after ``ids``, the checkpoint ``path`` loaded on the
    CPU (float32, reference paths) with ``default_device`` as torch's default device meanwhile
    (None: as it is): tensors the loader, model or engine make without naming a device land there."""
    from fastpath.engine.generate import Engine
    from fastpath.models.loader import load

    with torch.device(default_device) if default_device else contextlib.nullcontext():
        model = load(path, device="cpu", dtype=torch.float32, progress=False)
        return [r[0] for r in Engine(model, max_seq=len(ids) + n + 1).generate_step([ids], n)]


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of tiny convolutions: avoids spin-waiting on a busy CPU."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
