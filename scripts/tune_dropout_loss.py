"""Sweep dropout's and mse_loss's tuning knobs on a GPU at the benchmark shapes (issue 10).

Run on the GPU machine: ``PYTHONPATH=src python3 scripts/tune_dropout_loss.py [name ...]``
(names filter the cases by substring, e.g. ``dropout`` or ``none``). For every case each
candidate configuration is first checked against PyTorch on the case's inputs (dropout:
the output and the gradient equal ``x * mask / (1 - p)`` exactly, with the mask from the
plain-PyTorch Philox, and the keep rate is within 5 sigma of 1 - p; mse_loss: the loss and
the gradient against float64 PyTorch), then timed cold-L2 (a 2x-L2 buffer read before each
call, outside the timed interval) with ``fastpath.streams.median_ms``, next to the PyTorch
op on the same inputs, as ``python -m fastpath.bench training`` does (autograd forward +
``torch.autograd.grad``). One line per (case, config): config, ours us, torch us, ratio
(torch / ours), % of the copy bandwidth measured here (fewest bytes / time), and the
forward and backward kernels timed alone (their difference to the total is host time and
launch gaps). The first config of a case is the module default; the best one of each case
is printed at the end as the constants to set in ``ops/dropout.py`` / ``ops/loss.py``.
A config that fails (compile error, wrong answer) is reported and the sweep goes on; no
new config starts after BUDGET_S seconds (compilation included).

``TUNE_DROPOUT_LOSS_SMOKE=1 TRITON_INTERPRET=1``: a tiny dry run on the CPU (checks the script).
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from fastpath.ops import dropout as D
from fastpath.ops import loss as L
from fastpath.streams import _flush_buffer, median_ms

BUDGET_S = 75.0
REPS = 20
COPY_GBPS_FALLBACK = 4246.0
SMOKE = os.environ.get("TUNE_DROPOUT_LOSS_SMOKE") == "1"
DEV = torch.device("cpu" if SMOKE else "cuda")
N64M = 1 << 12 if SMOKE else 1 << 26
N16M = 1 << 10 if SMOKE else 1 << 24
NONE_SHAPE = (8, 512) if SMOKE else (8192, 4096)
P = 0.1
T0 = time.perf_counter()


def _sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def out_of_time() -> bool:
    return time.perf_counter() - T0 > BUDGET_S


def time_us(fn) -> float:
    for _ in range(2):
        fn()
    _sync()
    before = None if SMOKE else _flush_buffer(DEV).sum
    return 1e3 * median_ms(fn, 2 if SMOKE else REPS, before=before, device=DEV)


def copy_gbps() -> float:
    if SMOKE:
        return COPY_GBPS_FALLBACK
    try:
        src = torch.empty(1 << 28, device=DEV)  # 1 GiB
        dst = torch.empty_like(src)
        dst.copy_(src)
        ms = median_ms(lambda: dst.copy_(src), 10, device=DEV)
        src = dst = None  # free before the sweep
        return 2 * (1 << 30) / ms / 1e6
    except Exception:
        return COPY_GBPS_FALLBACK


@contextlib.contextmanager
def knobs(module, **values):
    """Set module-level tuning constants for the duration of a config."""
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def _rel(a, b) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


# ---------------------------------------------------------------------------- dropout

def _grad_inputs(n, dtype, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(n, generator=g, device=DEV).to(dtype)
    return x, torch.randn(n, generator=g, device=DEV).to(dtype)


def _dropout_native(x, g):
    xr = x.detach().requires_grad_()
    y = F.dropout(xr, P)
    return y, torch.autograd.grad(y, xr, g)[0]


def _dropout_ours(x, g):
    xr = x.detach().requires_grad_()
    y = D.dropout(xr, P)
    return y, torch.autograd.grad(y, xr, g)[0]


class DropoutCase:
    module = D

    def __init__(self, label, n, dtype, backward, configs):
        self.label, self.n, self.dtype, self.backward = label, n, dtype, backward
        self.configs = configs  # dicts of module constants; the first is the default
        self.nbytes = (4 if backward else 2) * n * dtype.itemsize

    def setup(self):
        self.x, self.g = _grad_inputs(self.n, self.dtype)
        seed = D.draw_seed(DEV, torch.Generator(device=DEV).manual_seed(123))
        bits = D.dropout_bits(seed, self.n, P)  # the plain-PyTorch Philox (oracle)
        self.keep = D._expand_bits(bits, self.n)
        del bits
        q = self.keep.double().mean().item()
        if abs(q - (1 - P)) > 5 * math.sqrt(P * (1 - P) / self.n) + 1e-9:
            raise AssertionError(f"reference keep rate {q:.5f} is not 1 - p")
        scale = torch.tensor(1.0 / (1.0 - P), device=DEV)
        self.want_y = (self.x.float() * torch.where(self.keep, scale, 0.0)).to(self.dtype)
        self.want_dx = (self.g.float() * torch.where(self.keep, scale, 0.0)).to(self.dtype)

    def native(self):
        if self.backward:
            return lambda: _dropout_native(self.x, self.g)
        return lambda: F.dropout(self.x, P)  # inputs need no grad: no autograd record

    @staticmethod
    def _differ(out, want) -> int:
        """Places where ``out`` is not ``want``: exact on the GPU; Triton's interpreter (smoke
        runs) rounds float32 -> bfloat16 by truncation, so there one bf16 ulp is allowed."""
        if SMOKE and out.dtype == torch.bfloat16:
            close = (out.float() - want.float()).abs() <= want.float().abs() * 2.0**-7
            return int((~close | ((out == 0) != (want == 0))).sum())
        return int((out != want).sum())

    def check(self):
        gen = torch.Generator(device=DEV).manual_seed(123)
        xr = self.x.detach().requires_grad_(self.backward)
        y = D.dropout(xr, P, generator=gen)
        if self._differ(y, self.want_y):
            return f"output differs from x * mask / (1 - p) at {self._differ(y, self.want_y)} places"
        if self.backward:
            dx = torch.autograd.grad(y, xr, self.g)[0]
            if self._differ(dx, self.want_dx):
                return f"gradient differs at {self._differ(dx, self.want_dx)} places"
        return None

    def ours(self):
        if self.backward:
            return lambda: _dropout_ours(self.x, self.g)
        return lambda: D.dropout(self.x, P)

    def kernels(self, cfg):
        """The forward and backward launches alone (no autograd, no seed draw)."""
        seed = D.draw_seed(DEV)
        fwd = lambda: D._launch(self.x, P, seed, None, self.backward,  # noqa: E731
                                cfg["FWD_BLOCK"], cfg["FWD_WARPS"])
        if not self.backward:
            return {"fwd": fwd}
        bits = D._launch(self.x, P, seed, None, True)[1]
        bwd = lambda: D._launch(self.g, P, None, bits, False, cfg["BWD_BLOCK"], cfg["BWD_WARPS"])  # noqa: E731
        return {"fwd": fwd, "bwd": bwd}

    @staticmethod
    def describe(cfg):
        s = f"fwd {cfg['FWD_BLOCK']}/w{cfg['FWD_WARPS']}"
        return s + (f" bwd {cfg['BWD_BLOCK']}/w{cfg['BWD_WARPS']}" if "BWD_BLOCK" in cfg else "")


def _dcfg(fb, fw, bb=None, bw=None):
    cfg = {"FWD_BLOCK": fb, "FWD_WARPS": fw}
    if bb is not None:
        cfg.update(BWD_BLOCK=bb, BWD_WARPS=bw)
    return cfg


# ---------------------------------------------------------------------------- mse_loss

_RED_CODE = {"mean": 1, "sum": 2}


class MSECase:
    module = L

    def __init__(self, label, shape, dtype, reduction, configs):
        self.label, self.shape, self.dtype, self.reduction = label, shape, dtype, reduction
        self.configs = configs
        n = math.prod(shape)
        self.nbytes = (7 if reduction == "none" else 5) * n * dtype.itemsize  # the passes' floor

    def setup(self):
        self.x, self.t = _grad_inputs(self.shape, self.dtype, 1)
        x64, t64 = self.x.double().requires_grad_(), self.t.double()
        ref = F.mse_loss(x64, t64, reduction=self.reduction)
        self.gy = torch.ones_like(ref).to(self.dtype) if self.reduction != "none" else self.t
        self.want_y = ref.detach()
        self.want_dx = torch.autograd.grad(ref, x64, self.gy.double())[0]
        del x64, t64, ref

    def _grad_out(self, y):
        return torch.ones_like(y) if self.reduction != "none" else self.t

    def _fwd_bwd(self, loss):
        def run():
            xr = self.x.detach().requires_grad_()
            y = loss(xr, self.t, reduction=self.reduction)
            return y, torch.autograd.grad(y, xr, self._grad_out(y))[0]
        return run

    def native(self):
        return self._fwd_bwd(F.mse_loss)

    def ours(self):
        return self._fwd_bwd(L.mse_loss)

    def check(self):
        y, dx = self.ours()()
        tol = {torch.float32: 1e-5, torch.bfloat16: 8e-3, torch.float16: 1e-3}[self.dtype]
        ey, edx = _rel(y, self.want_y), _rel(dx, self.want_dx)
        if not (ey <= tol and edx <= tol):
            return f"rel err loss {ey:.1e} grad {edx:.1e} > {tol:.0e}"
        return None

    def kernels(self, cfg):
        red = self.reduction != "none"
        fwd = lambda: L._forward(self.x, self.t, self.reduction, self.dtype,  # noqa: E731
                                 cfg.get("RED_BLOCK" if red else "MAP_BLOCK"),
                                 cfg.get("RED_WARPS" if red else "MAP_WARPS"), cfg.get("PROGRAMS_PER_SM"))
        bwd = lambda: L._backward_kernel(self.x, self.t, self.gy, self.reduction, True, False,  # noqa: E731
                                         cfg["MAP_BLOCK"], cfg["MAP_WARPS"])
        return {"fwd": fwd, "bwd": bwd}

    @staticmethod
    def describe(cfg):
        s = ""
        if "RED_BLOCK" in cfg:
            s = f"red {cfg['RED_BLOCK']}/w{cfg['RED_WARPS']} x{cfg['PROGRAMS_PER_SM']}/SM "
        return s + f"map {cfg['MAP_BLOCK']}/w{cfg['MAP_WARPS']}"


def _rcfg(rb, rw, per_sm, mb, mw):
    return {"RED_BLOCK": rb, "RED_WARPS": rw, "PROGRAMS_PER_SM": per_sm, "MAP_BLOCK": mb, "MAP_WARPS": mw}


def _mcfg(mb, mw):
    return {"MAP_BLOCK": mb, "MAP_WARPS": mw}


# ---------------------------------------------------------------------------- cases

def _default_dropout(backward):
    return _dcfg(D.FWD_BLOCK, D.FWD_WARPS, *((D.BWD_BLOCK, D.BWD_WARPS) if backward else ()))


def _with_default(default, configs):
    return [default] + [c for c in configs if c != default]


CASES = [  # by priority: the budget may cut the last ones
    DropoutCase("dropout fwd+bwd bf16 64M", N64M, torch.bfloat16, True, _with_default(_default_dropout(True), [
        _dcfg(1024, 4, 4096, 8), _dcfg(4096, 4, 4096, 8), _dcfg(4096, 8, 8192, 8), _dcfg(2048, 8, 2048, 4)])),
    MSECase("mse_loss mean fwd+bwd bf16 64M", (N64M,), torch.bfloat16, "mean", _with_default(
        _rcfg(L.RED_BLOCK, L.RED_WARPS, L.PROGRAMS_PER_SM, L.MAP_BLOCK, L.MAP_WARPS), [
            _rcfg(8192, 8, 2, 4096, 8), _rcfg(8192, 16, 2, 8192, 8), _rcfg(2048, 4, 8, 2048, 4),
            _rcfg(4096, 8, 2, 4096, 8)])),
    MSECase("mse_loss none fwd+bwd bf16 8192x4096", NONE_SHAPE, torch.bfloat16, "none", _with_default(
        _mcfg(L.MAP_BLOCK, L.MAP_WARPS), [_mcfg(2048, 4), _mcfg(8192, 8), _mcfg(8192, 16)])),
    DropoutCase("dropout fwd bf16 64M (no grad)", N64M, torch.bfloat16, False, _with_default(
        _default_dropout(False), [_dcfg(1024, 4), _dcfg(4096, 4), _dcfg(4096, 8)])),
    MSECase("mse_loss sum fwd+bwd fp32 64M", (N64M,), torch.float32, "sum", _with_default(
        _rcfg(L.RED_BLOCK, L.RED_WARPS, L.PROGRAMS_PER_SM, L.MAP_BLOCK, L.MAP_WARPS), [
            _rcfg(8192, 16, 2, 8192, 8), _rcfg(2048, 4, 8, 2048, 4)])),
    DropoutCase("dropout fwd+bwd fp32 16M", N16M, torch.float32, True, _with_default(_default_dropout(True), [
        _dcfg(1024, 4, 2048, 4), _dcfg(4096, 8, 8192, 8)])),
]


def run_case(case, gbps):
    try:
        case.setup()
        native = case.native()
        native()
        torch_us = time_us(native)
    except Exception as exc:
        print(f"{case.label}: setup or torch failed: {type(exc).__name__}: {str(exc)[:300]}")
        traceback.print_exc(limit=2)
        return None
    best = None
    for i, cfg in enumerate(case.configs):
        tag = case.describe(cfg) + (" (default)" if i == 0 else "")
        if out_of_time():
            print(f"{case.label:38s} | {tag:44s} | skipped: time budget")
            continue
        try:
            with knobs(case.module, **cfg):  # the defaults the public op reads
                bad = case.check()
                if bad:
                    print(f"{case.label:38s} | {tag:44s} | WRONG: {bad}")
                    continue
                us = time_us(case.ours())
                parts = " ".join(f"{k} {time_us(fn):.1f}" for k, fn in case.kernels(cfg).items())
        except Exception as exc:
            print(f"{case.label:38s} | {tag:44s} | FAILED: {type(exc).__name__}: {str(exc).strip()[:200]}")
            _sync()
            continue
        pct = 100 * case.nbytes / (us * 1e-6) / 1e9 / gbps
        print(f"{case.label:38s} | {tag:44s} | ours {us:8.1f} us | torch {torch_us:8.1f} us | "
              f"{torch_us / us:5.2f}x | {pct:5.1f}% copy | kernels alone: {parts} us", flush=True)
        if best is None or us < best[0]:
            best = (us, cfg)
    for name in ("x", "g", "t", "keep", "want_y", "want_dx", "gy"):
        if hasattr(case, name):
            delattr(case, name)
    if DEV.type == "cuda":
        torch.cuda.empty_cache()
    return best


def main(filters):
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if DEV.type == 'cuda' else 'cpu'}")
    gbps = copy_gbps()
    print(f"copy bandwidth {gbps:.0f} GB/s (read + write); %copy = fewest bytes / time / that; "
          f"budget {BUDGET_S:.0f} s")
    winners = []
    for case in CASES:
        if filters and not any(f in case.label for f in filters):
            continue
        best = run_case(case, gbps)
        if best is not None:
            winners.append((case.label, best))
    print(f"\nbest per case (set these module constants; {time.perf_counter() - T0:.0f} s in all):")
    for label, (us, cfg) in winners:
        module = "ops/dropout.py" if label.startswith("dropout") else "ops/loss.py"
        print(f"  {label:38s} {us:8.1f} us  {module}: " + ", ".join(f"{k} = {v}" for k, v in cfg.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
