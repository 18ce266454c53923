"""Timing, ceilings and records for the benchmark suites.

Timing on a CUDA GPU: a few warm-up calls, then the median of per-call device-event timings.
Cold L2 (default): before each timed call, outside the timed region, a buffer of 2x the L2
size is read (a write would leave dirty lines for the timed call to write back). Hot L2 (cases
with ``hot=True``, an extra row): the inputs are rewritten in place just before each timed call,
as logits are right after the lm_head matmul.
Graph mode: many calls captured in one ``torch.cuda.CUDAGraph``, rotating over enough input
sets that their bytes exceed 2x L2 (cold; a single set for hot), replays timed with events,
divided by the number of calls. torch is imported only inside the functions that need it.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..streams import DEFAULT_L2, reps_for

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8,
            "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8}
#: Loose bounds on ||ours - torch|| / ||torch|| for the correctness check before timing.
REL_TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-10}


def randn_inputs(shape, dtype: str, device, seed: int, scale: float = 1.0) -> tuple:
    """One input set: normal data (never zeros) from a seeded generator on ``device``."""
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(tuple(shape), generator=g, device=device, dtype=torch.float32)
    return (x.mul_(scale).to(getattr(torch, dtype)),)


@dataclass
class Case:
    """One benchmark case: ours vs the PyTorch-native way, on the same inputs."""
    suite: str
    name: str
    shape: tuple
    dtype: str
    ours: Callable  # (*inputs) -> output
    native: Callable  # (*inputs) -> output, the PyTorch-native way
    check: Callable  # (inputs, ours_out, native_out) -> (ok, detail)
    nbytes: Callable  # (shape, itemsize) -> fewest bytes the op must read + write
    cpu_shape: tuple  # the tiny size checked on a machine without a GPU
    make: Callable = randn_inputs  # (shape, dtype, device, seed) -> tuple of inputs
    target: Optional[tuple] = None  # ("us", 5.0): ours_us <= 5; ("pct_copy", 85.0): pct_copy >= 85
    graphs: bool = False  # launch-bound: also time the CUDA-graph mode
    capturable: bool = True  # False: the op syncs with the host (as PyTorch's does): never a graph row
    hot: bool = False  # also a hot-L2 row
    quick: bool = False  # part of --quick

    @property
    def target_text(self) -> Optional[str]:
        if self.target is None:
            return None
        kind, value = self.target
        return f"<= {value:g} us" if kind == "us" else f">= {value:g}% copy"

    def met(self, ours_us, pct_copy) -> Optional[bool]:
        if self.target is None:
            return None
        kind, value = self.target
        got = ours_us if kind == "us" else pct_copy
        return got is not None and (got <= value if kind == "us" else got >= value)


def rel_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64, in chunks (NaN anywhere gives NaN)."""
    import torch
    a, b = out.reshape(-1), ref.reshape(-1)
    num = torch.zeros((), dtype=torch.float64, device=a.device)
    den = num.clone()
    for i in range(0, a.numel(), 1 << 26):
        x, y = a[i:i + (1 << 26)].double(), b[i:i + (1 << 26)].double()
        num += (x - y).square().sum()
        den += y.square().sum()
    return math.sqrt(num.item()) / (math.sqrt(den.item()) or 1.0)


def close_check(inputs, out, ref):
    """Ours vs torch: same shape and dtype, relative error within the loose bound."""
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return False, f"got {out.dtype} {tuple(out.shape)}, torch gives {ref.dtype} {tuple(ref.shape)}"
    tol = REL_TOL[str(ref.dtype).replace("torch.", "")]
    err = rel_error(out, ref)
    return err <= tol, f"rel err {err:.1e} (bound {tol:.0e})"


def sqnr_check(against: str, bound_db: float = 25.0) -> Callable:
    """A check for lossy variants (fp8): the SQNR of ours against ``against`` >= bound_db."""
    def check(inputs, out, ref):
        err = (out.double() - ref.double()).square().sum().item()
        sig = ref.double().square().sum().item()
        db = 10 * math.log10(sig / err) if err > 0 else float("inf")
        return db >= bound_db, f"SQNR {db:.1f} dB vs {against} (bound {bound_db:g} dB)"
    return check


def describe(exc: BaseException) -> str:
    """One line: the type, the first line and (for long messages like Triton's) the last."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()] or [""]
    msg = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return f"{type(exc).__name__}: {msg[:300]}"


def run_check(case: Case, inputs):
    """(ok, detail, ours_works, native_works) of one case on ``inputs``; never raises."""
    outs = []
    for fn in (case.ours, case.native):
        try:
            outs.append(fn(*inputs))
        except Exception as exc:  # recorded, never hidden
            outs.append(exc)
    ours, native = outs
    works = [not isinstance(o, Exception) for o in outs]
    if not all(works):
        errs = [f"{who} raised {describe(o)}"
                for who, o in zip(("ours", "torch"), outs) if isinstance(o, Exception)]
        return False, "; ".join(errs), works[0], works[1]
    try:
        ok, detail = case.check(inputs, ours, native)
    except Exception as exc:
        ok, detail = False, f"check raised {describe(exc)}"
    return bool(ok), detail, True, True


# ---------------------------------------------------------------------------- environment

def git_commit() -> str:
    """The checkout's commit; ``FASTPATH_COMMIT`` where the tree was copied without .git."""
    if os.environ.get("FASTPATH_COMMIT"):
        return os.environ["FASTPATH_COMMIT"]
    for cwd in (Path(__file__).resolve().parent, Path.cwd()):
        try:
            out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd,
                                 capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return "unknown"


def environment(command: str) -> dict:
    import torch
    from .._core.backend import TRITON_ERROR, TRITON_VERSION
    now = datetime.datetime.now(datetime.timezone.utc)
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "triton": TRITON_VERSION or f"unavailable ({TRITON_ERROR})",
            "python": platform.python_version(), "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "run": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "commit": git_commit(), "command": command}


def results_path(env: dict, override: Optional[str] = None) -> Path:
    if override:
        return Path(override)
    slug = re.sub(r"[^a-z0-9]+", "-", env["gpu"].lower()).strip("-") or "gpu"
    return Path.cwd() / "bench" / "results" / f"{env['date'][:10]}-{slug}.jsonl"


def append_record(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------- timing

def _median_ms(fn: Callable, reps: int, before: Optional[Callable] = None) -> float:
    """Median ms of ``reps`` calls on the current CUDA device (:func:`fastpath.streams.median_ms`)."""
    from ..streams import median_ms
    return median_ms(fn, reps, before, "cuda")


def measure_ceilings(copy_bytes: int = 2 * 2**30, n: int = 8192) -> dict:
    """Device-to-device copy bandwidth (bytes read + written) and bf16 matmul TFLOP/s."""
    import torch
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2)
    src = torch.randn(copy_bytes // 4, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    copy_ms = _median_ms(lambda: dst.copy_(src), 10)
    src = dst = None  # free before the matmul
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    mm_ms = _median_ms(lambda: a @ b, 10)
    a = b = None
    torch.cuda.empty_cache()
    return {"copy_gbps": 2 * copy_bytes / copy_ms / 1e6, "copy_bytes": copy_bytes,
            "matmul_bf16_tflops": 2 * n**3 / mm_ms / 1e9, "matmul_n": n, "l2_bytes": l2}


def host_us(fn, n: int = 100, warmup: int = 10) -> float:
    """Host microseconds one call of ``fn`` costs: ``n`` calls with no sync between them (after
    ``warmup`` untimed ones), timed on the wall clock; the GPU hides this only behind longer
    work of its own."""
    import torch
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    us = (time.perf_counter() - t0) / n * 1e6
    sync()
    return us


def print_profile(name: str, fn, n: int = 200, top: int = 14) -> None:
    """A cProfile of ``n`` calls of ``fn`` (no sync between them), its ``top`` functions by
    own time printed under ``name``: where an eager call's host time goes."""
    import cProfile
    import pstats

    import torch
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    print(f"== {name}: {n} calls")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def kernel_times(fn, reps: int = 10, before: Optional[Callable] = None, cuda: bool = True) -> dict:
    """What each kernel (``cuda``; else each CPU op) that ``fn`` runs costs, from the PyTorch
    profiler over ``reps`` calls (``before()`` ahead of each, e.g. an L2 flush, profiled too):
    ``{name: (us per call, launches per call)}``."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            if before is not None:
                before()
            fn()
        if cuda:
            torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        us = (getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)) if cuda \
            else e.self_cpu_time_total
        if us:
            out[e.key] = (us / reps, e.count / reps)
    return out


@contextlib.contextmanager
def knobs(module, **values):
    """A context that sets a module's tuning knobs (module-level names) and restores them:
    how the tuning scripts try variants. Every launch memo is cleared on entering and on leaving
    (a memo's replay would keep launching what an earlier variant recorded)."""
    from unittest import mock

    from .._core import memo
    with mock.patch.multiple(module, **values) if values else contextlib.nullcontext():
        memo.clear_all()
        try:
            yield
        finally:
            memo.clear_all()


class Timer:
    """Eager and graph timings against one cold-L2 flush buffer."""

    def __init__(self, l2_bytes: int):
        import torch
        self.l2 = l2_bytes
        # Flushing reads 2x L2 of clean data: a write (memset) would leave dirty lines that the
        # timed kernel then has to write back, inflating every cold timing.
        self._flush_buf = torch.ones(2 * l2_bytes // 4, dtype=torch.float32, device="cuda")
        self.flush = lambda: self._flush_buf.sum()
        self.stream = torch.cuda.Stream()

    def estimate_ms(self, fn, inputs) -> float:
        """Warm up (compiles), then one cold timed call: the size of the repetition counts."""
        for _ in range(3):
            fn(*inputs)
        return _median_ms(lambda: fn(*inputs), 1, self.flush)

    def eager_us(self, fn, inputs, hot: bool, est_ms: float) -> float:
        reps = reps_for(est_ms)

        def before():
            self.flush()
            if hot:  # the inputs were just written, as logits after the lm_head matmul
                for t in inputs:
                    t.mul_(1)
        return 1e3 * _median_ms(lambda: fn(*inputs), reps, before)

    def graph_us(self, fn, sets: list, est_ms: float) -> float:
        import torch
        calls = max(len(sets), min(200, int(2.0 / max(est_ms, 1e-3)) + 1))
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):  # warm-up on the capture stream
            for inputs in sets[:3]:
                fn(*inputs)
        torch.cuda.current_stream().wait_stream(self.stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream):
                for i in range(calls):
                    fn(*sets[i % len(sets)])
        except Exception:  # a call that cannot be captured: later captures start on a fresh stream, not
            self.stream = torch.cuda.Stream()  # on the one whose capture it invalidated
            raise
        graph.replay()
        torch.cuda.synchronize()
        reps = max(3, min(20, int(100 / (est_ms * calls + 0.01))))
        ms = _median_ms(graph.replay, reps)
        del graph
        return 1e3 * ms / calls


# ---------------------------------------------------------------------------- rows

def make_row(case: Case, mode: str, l2: str, ours_us, torch_us, ok: bool, detail: str,
             copy_gbps: float) -> dict:
    nbytes = case.nbytes(case.shape, ITEMSIZE[case.dtype])
    gbps = nbytes / ours_us / 1e3 if ours_us else None
    pct = 100 * gbps / copy_gbps if gbps and copy_gbps else None
    return {"suite": case.suite, "case": case.name, "shape": list(case.shape), "dtype": case.dtype,
            "mode": mode, "l2": l2, "ours_us": ours_us, "torch_us": torch_us,
            "ratio": torch_us / ours_us if ours_us and torch_us else None, "bytes": nbytes,
            "gbps": gbps, "pct_copy": pct, "target": case.target_text,
            "met": case.met(ours_us, pct), "ok": ok, "check": detail}


def run_case(case: Case, timer: Timer, ceilings: dict, graphs: bool):
    """Check, then time ``case`` in each of its modes; yields one row per (mode, l2)."""
    import torch
    dev = torch.device("cuda")
    sets = [case.make(case.shape, case.dtype, dev, 0)]
    ok, detail, ours_ok, native_ok = run_check(case, sets[0])
    fns = [case.ours if ours_ok else None, case.native if native_ok else None]
    est, errors = [None, None], []
    for i, fn in enumerate(fns):
        if fn is not None:
            est[i] = timer.estimate_ms(fn, sets[0])
    modes = [("eager", "cold")] + ([("eager", "hot")] if case.hot else [])
    if (graphs or case.graphs) and case.capturable:
        modes += [("graph", "cold")] + ([("graph", "hot")] if case.hot else [])
    for mode, l2 in modes:
        if mode == "graph" and l2 == "cold" and len(sets) == 1:
            per_set = sum(t.nbytes for t in sets[0])
            n_sets = min(512, math.ceil(2 * timer.l2 / max(per_set, 1)) + 1)
            sets += [case.make(case.shape, case.dtype, dev, s) for s in range(1, n_sets)]
        us = [None, None]
        for i, fn in enumerate(fns):
            if fn is None:
                continue
            try:
                if mode == "eager":
                    us[i] = timer.eager_us(fn, sets[0], l2 == "hot", est[i])
                else:
                    us[i] = timer.graph_us(fn, sets[:1] if l2 == "hot" else sets,
                                          min(e for e in est if e is not None))
            except Exception as exc:  # e.g. not capturable: recorded with the row
                errors.append(f"{('ours', 'torch')[i]} {mode}: {describe(exc)}")
                torch.cuda.synchronize()
        note = "; ".join([detail] + errors)
        # torch failing to run a mode (e.g. pinv cannot be captured in a graph) is noted, not ours failing
        ours_failed = any(e.startswith("ours") for e in errors)
        yield make_row(case, mode, l2, us[0], us[1], ok and not ours_failed, note, ceilings["copy_gbps"])
        errors = []
    del sets
    torch.cuda.empty_cache()

