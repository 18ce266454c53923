"""fastpath.streams on the CPU (always) and on CUDA (when present), timings against the host clock."""
import threading
import time

import pytest
import torch

from fastpath import streams as fs

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CPU = torch.device("cpu")


def _returns_within(fn, seconds=5.0):
    """Run ``fn`` in a thread; True if it returned within ``seconds`` (a hang fails the test)."""
    done = threading.Event()
    err = []

    def run():
        try:
            fn()
        except BaseException as exc:  # re-raised below
            err.append(exc)
        done.set()
    threading.Thread(target=run, daemon=True).start()
    ok = done.wait(seconds)
    if err:
        raise err[0]
    return ok


# ---------------------------------------------------------------------------- CPU

def test_cpu_streams_context_and_set_stream():
    default = fs.default_stream(CPU)
    assert fs.current_stream(CPU) == default
    s, t = fs.Stream(CPU), fs.Stream("cpu")
    assert s != t and s != default and s.device == CPU and s.native is None
    with fs.stream(s) as got:
        assert got is s and fs.current_stream(CPU) == s
        with fs.stream(t):
            assert fs.current_stream(CPU) == t
        with fs.stream(None) as nothing:  # no-op
            assert nothing is None and fs.current_stream(CPU) == s
        assert fs.current_stream(CPU) == s
    assert fs.current_stream(CPU) == default
    with pytest.raises(RuntimeError):
        with fs.stream(s):
            raise RuntimeError("boom")
    assert fs.current_stream(CPU) == default  # restored after an exception
    fs.set_stream(t)
    try:
        assert fs.current_stream(CPU) == t
        seen = []
        th = threading.Thread(target=lambda: seen.append(fs.current_stream(CPU)))
        th.start()
        th.join()
        assert seen == [default]  # per thread
    finally:
        fs.set_stream(default)
    assert s.query() and s.synchronize() is None
    s.wait_stream(t)
    s.wait_event(fs.Event().record(t))
    assert isinstance(s.record_event(), fs.Event)
    assert len({s, fs.Stream.wrap(s), default, fs.default_stream("cpu")}) == 2


def test_default_device_is_the_accelerator_or_cpu():
    want = "cuda" if torch.cuda.is_available() else None
    if want is None and getattr(torch, "accelerator", None) is not None and torch.accelerator.is_available():
        want = torch.accelerator.current_accelerator().type
    assert fs.current_stream().device.type == (want or "cpu")


def test_cpu_event_timing_matches_the_host_clock():
    start, end = fs.Event(enable_timing=True), fs.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record(fs.current_stream(CPU))
    time.sleep(0.02)
    end.record(fs.current_stream(CPU))
    wall = (time.perf_counter() - t0) * 1e3
    ms = start.elapsed_time(end)
    assert 20.0 <= ms <= wall + 0.5
    assert start.query() and end.query()


def test_cpu_short_intervals_never_negative_and_no_hang():
    s = fs.current_stream(CPU)
    pairs = [(fs.Event(enable_timing=True, device="cpu"), fs.Event(enable_timing=True, device="cpu"))
             for _ in range(2000)]
    for a, b in pairs:
        a.record(s)
        b.record(s)
    times = [a.elapsed_time(b) for a, b in pairs]
    assert min(times) >= 0.0 and max(times) < 1000.0  # generous: the CPU may be shared
    e = fs.Event(enable_timing=True)
    fs.synchronize(CPU)
    assert _returns_within(e.synchronize) and e.query()  # never recorded: returns at once
    e.record(s)
    fs.synchronize(CPU)
    assert _returns_within(e.synchronize) and _returns_within(lambda: e.elapsed_time(e))
    assert e.elapsed_time(e) == 0.0
    e.wait(s)
    e.wait()


def test_event_errors():
    a, b = fs.Event(enable_timing=True, device="cpu"), fs.Event(enable_timing=True, device="cpu")
    with pytest.raises(ValueError, match="start"):
        a.elapsed_time(b)  # neither recorded
    a.record()
    with pytest.raises(ValueError, match="end"):
        a.elapsed_time(b)
    with pytest.raises(TypeError, match="end"):
        a.elapsed_time(3.0)
    untimed = fs.Event(device="cpu").record()
    with pytest.raises(ValueError, match="enable_timing"):
        untimed.elapsed_time(a)
    with pytest.raises(TypeError, match="stream"):
        a.record("side")
    with pytest.raises(TypeError, match="stream"):
        fs.stream(object())
    with pytest.raises(TypeError, match="stream"):
        fs.set_stream(None)
    with pytest.raises(TypeError, match="tensor"):
        fs.record_stream([1.0], fs.current_stream(CPU))
    fs.record_stream(torch.ones(3), fs.Stream(CPU))  # harmless on the CPU
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="stream"):
            fs.Event(device="cpu").record(fs.current_stream("cuda"))


def test_timed_on_cpu():
    calls = []

    def work(delay, *, tag):
        calls.append(tag)
        time.sleep(delay)
    ms = fs.timed(work, 0.005, tag="x", warmup=2, iters=5, device="cpu")
    assert 5.0 <= ms < 100.0 and calls == ["x"] * 7
    calls.clear()
    ms = fs.timed(work, 0.001, tag="y", device="cpu")  # the harness's repetition rule
    assert 1.0 <= ms < 100.0 and 3 + 1 + 10 <= len(calls) <= 3 + 1 + 100
    x = torch.randn(64, 64)
    assert fs.timed(torch.mm, x, x, iters=3, warmup=0) > 0.0  # device from the tensor
    with pytest.raises(TypeError, match="fn"):
        fs.timed(3)
    with pytest.raises(ValueError, match="iters"):
        fs.timed(work, 0.0, tag="z", iters=0)
    with pytest.raises(ValueError, match="warmup"):
        fs.timed(work, 0.0, tag="z", warmup=-1)


# ---------------------------------------------------------------------------- CUDA

@CUDA
def test_cuda_streams_match_torch():
    dev = torch.device("cuda", torch.cuda.current_device())
    assert fs.current_stream().native == torch.cuda.current_stream()
    assert fs.default_stream("cuda").native == torch.cuda.default_stream()
    side = fs.Stream()
    assert side.device == dev and isinstance(side.native, torch.cuda.Stream)
    with fs.stream(side):
        assert torch.cuda.current_stream() == side.native
        assert fs.current_stream() == side
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    with fs.stream(torch.cuda.Stream()) as wrapped:  # torch streams accepted
        assert fs.current_stream() == wrapped


@CUDA
def test_cuda_cross_stream_ordering_and_record_stream():
    side = fs.Stream()
    x = torch.randn(2048, 2048, device="cuda")
    done = fs.Event()
    side.wait_stream(fs.current_stream())  # x is ready before side uses it
    with fs.stream(side):
        torch.cuda._sleep(20_000_000)  # keep the side stream busy (~10 ms)
        y = x @ x
        done.record()
    fs.record_stream(y, fs.current_stream())
    done.wait()  # the current stream waits for y
    got = y.sum()
    want = (x.double() @ x.double()).sum()
    assert torch.allclose(got.double(), want, rtol=1e-3)
    side.synchronize()
    assert side.query() and done.query()


@CUDA
def test_cuda_event_timing_reliable():
    s = fs.current_stream()
    start, end = fs.Event(enable_timing=True), fs.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(50_000_000)
    end.record()
    t0 = time.perf_counter()
    ms = start.elapsed_time(end)  # waits for end itself
    assert ms > 1.0 and ms <= (time.perf_counter() - t0) * 1e3 + 1000.0
    pairs = [(fs.Event(enable_timing=True), fs.Event(enable_timing=True)) for _ in range(500)]
    for a, b in pairs:
        a.record(s)
        b.record(s)
    assert min(a.elapsed_time(b) for a, b in pairs) >= 0.0  # back to back: never negative
    e = fs.Event(enable_timing=True)
    assert _returns_within(e.synchronize) and e.query()  # never recorded
    e.record()
    torch.cuda.synchronize()
    assert _returns_within(e.synchronize) and _returns_within(e.query) and e.query()
    assert _returns_within(lambda: start.elapsed_time(e))
    fs.synchronize()
    assert _returns_within(e.synchronize)


@CUDA
def test_cuda_timed_matches_events():
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    ms = fs.timed(torch.mm, x, x, iters=10)
    ms_sleep = fs.timed(torch.cuda._sleep, 10_000_000, iters=5, cold_l2=False)
    assert 0.0 < ms < 100.0 and ms_sleep > 1.0
