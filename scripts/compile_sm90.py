"""Compile, for the H200 (sm_90) and without a GPU, every Triton kernel that some fastpath calls
launch: the calls go through Triton's interpreter, each launch's arguments are recorded (the
kernels themselves are not run: ``RUN_KERNELS``), and each distinct (kernel, specialisation) is
compiled for CUDA 9.0 with Triton's pipeline: the first variant of each kernel to a cubin
(``triton.compile``), the others through the front end and the GPU layout passes (TTGIR;
``COMPILE_FULL=1``: every one to a cubin). Catches what the interpreter accepts and the compiler
rejects (a helper's default string argument, in triton 3.6, broke the blocked LU on the GPU while
every CPU test passed).

    PYTHONPATH=/path/to/triton-3.6:src python scripts/compile_sm90.py \
        [linalg|linalg-lu|linalg-rest|batch_norm|all|attention|linalg-gpu|ops-gpu|training-gpu|tests:PATH]

(``tests:tests/ops``: every launch of that part of the test suite. ``COMPILE_PDL=N``: kernels
with a ``PDL`` constexpr compile with that PDL mode, where the interpreter records 0.
``COMPILE_SET="MODULE.KNOB=V;MODULE.TABLE:KEY=V"``: knobs or plan-table entries set before the
calls record, as the bench's ``--set``. ``COMPILE_CALLS=TEXT``: the GPU-plan parts' calls whose names
hold TEXT only. ``COMPILE_LOOPS=TEXT``: each variant of a kernel whose name
holds TEXT compiled to a cubin and its SASS loops listed (instructions an iteration, by opcode:
barriers, shuffles, shared-memory and global loads; ``COMPILE_LOOP_OPS=FSEL,IMAD`` adds opcodes),
a GPU-free look at a step's cost;
``COMPILE_DUMP=DIR`` writes those variants' TTGIR and PTX there.)

``attention``, ``linalg-gpu`` (the linear-algebra bench's issue-sized calls), ``ops-gpu`` (the
decode path's linear, scaled_mm, one-token MoE, softmax and rms_norm at model shapes; the MoE's
grouped path reads its routing back, which is garbage here, so it is not reached) and
``training-gpu`` (the training bench's batch_norm, dropout and mse_loss forward + backward; bincount
through global atomics only: its shared-memory path needs a CUDA tensor) record with the
GPU's plans instead (each module's INTERPRET off, the backend answering as an H200: 132 SMs,
capability 9.0, TMA and fp8 on), compile every variant to a cubin and fail any that needs more
shared memory than an sm_90 block may take (SMEM_LIMIT; Triton raises ``OutOfResources`` at
launch there): the decode kernel's 64-row programs with a mask needed up to 245816 B at three
stages. ``COMPILE_ARCH=89`` (RTX 4090 / L40S, 99 KB a block), ``86`` or ``80`` (A100, 163 KB)
answer as that GPU instead; a variant past its shared memory is compiled again with fewer
pipeline stages, as ``launch.Launcher`` does at launch, and fails only at one stage.

(It runs itself again, with TRITON_INTERPRET=1 but for the GPU-plan parts, to record the launches, then compiles them;
``RECORD_PYTHONPATH`` replaces PYTHONPATH for that run, e.g. ``src`` to record with the
installed Triton's interpreter and compile with another Triton.)

The interpreter's plans use small tiles, so the compiled variants are the GPU code paths
(constexpr branches) at other tile sizes.
"""
import os
import sys
import time

import torch

from fastpath._core import launch as L

_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
          torch.int32: "i32", torch.int64: "i64", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
          torch.bool: "i1", torch.float8_e4m3fn: "fp8e4nv", torch.float8_e5m2: "fp8e5"}
_SEEN: dict = {}


def _params(fn):
    """[(name, is constexpr, default)] of a kernel's Python function."""
    import inspect
    empty = inspect.Parameter.empty
    return [(p.name, "constexpr" in str(p.annotation), None if p.default is empty else p.default)
            for p in inspect.signature(fn).parameters.values()]


def _record(self, grid, args, kwargs):
    fn = getattr(self.fn, "fn", self.fn)
    params = _params(fn)
    vals = [args[i] if i < len(args) else kwargs.get(n, d) for i, (n, _, d) in enumerate(params)]
    sig, consts, attrs, key = {}, {}, {}, []
    for i, ((pname, is_const, _), v) in enumerate(zip(params, vals)):
        if is_const or v is None:
            sig[pname], consts[(i,)] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            sig[pname] = "*" + _TYPES[v.dtype]
            if v.data_ptr() % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, bool):
            sig[pname] = "i1"
        elif isinstance(v, int):
            if v == 1:
                sig[pname], consts[(i,)] = "constexpr", 1
            else:
                sig[pname] = "i32" if -2**31 <= v < 2**31 else "i64"
                if v % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, float):
            sig[pname] = "fp32"
        elif hasattr(v, "block_shape"):  # a tensor descriptor
            sig[pname] = f"tensordesc<{_TYPES[v.base.dtype]}[{','.join(str(d) for d in v.block_shape)}]>"
        else:
            raise TypeError(f"{fn.__name__}: argument {pname} of type {type(v).__name__}")
        key.append((sig[pname], repr(consts.get((i,))), (i,) in attrs))
    opts = {k: kwargs[k] for k in ("num_warps", "num_stages", "maxnreg") if k in kwargs}
    name = f"{fn.__module__}.{fn.__name__}"
    _SEEN.setdefault((name, tuple(key), tuple(opts.items())), (name, sig, consts, attrs, opts))
    if RUN_KERNELS:
        return _ORIG(self, grid, args, kwargs)
    return None


_ORIG = L.Launcher.launch
#: Whether recorded launches also run (in the interpreter). They need not: which kernels launch,
#: with which constexprs, dtypes and alignments, never depends on the data in these calls, and
#: running them was nine tenths of this script's time (``COMPILE_RUN_KERNELS=1`` runs them).
RUN_KERNELS = os.environ.get("COMPILE_RUN_KERNELS") == "1"


def _record_calls(calls) -> None:
    """Make each (name, call) with the GPU's plans, the kernels not run: the host code sees garbage
    results, so a call that reads one back may raise; the launches it made before count.
    ``COMPILE_CALLS=TEXT``: only the calls whose names hold TEXT."""
    only = os.environ.get("COMPILE_CALLS", "")
    for name, call in calls:
        if only not in name:
            continue
        before = len(_SEEN)
        try:
            call()
            how = "ok"
        except Exception as exc:  # noqa: BLE001 - garbage results; the launches are what counts
            how = f"{type(exc).__name__} after its launches: {str(exc)[:120]}"
        print(f"recorded {name}: {len(_SEEN) - before} new variants ({how})", file=sys.stderr, flush=True)


def run_calls(which: str) -> None:
    """The fastpath calls whose launches are compiled; ``tests:PATH`` runs pytest on PATH."""
    global RUN_KERNELS
    if which.startswith("tests:"):
        import pytest
        RUN_KERNELS = True  # tests read results back and branch on them
        # (in this process: the suite's conftest would hand the tests to xdist workers, unrecorded)
        pytest.main([*which[len("tests:"):].split(), "-q", "-p", "no:cacheprovider", "-p", "no:xdist"])
        return
    import fastpath
    from fastpath.ops import batch_norm as bn
    g = torch.Generator().manual_seed(0)
    la = fastpath.linalg
    if which in ("linalg", "linalg-lu", "all"):  # (linalg = linalg-lu + linalg-rest)
        for dt in (torch.float32, torch.complex64):
            A = torch.randn(9, 40, 40, generator=g, dtype=dt)
            LU, piv, _ = la.lu_factor_ex(A)
            la.lu_solve(LU, piv, torch.randn(9, 40, 3, generator=g, dtype=dt))
            la.lu_solve(LU, piv, torch.randn(9, 40, 40, generator=g, dtype=dt))
            la.det(A)
            la.slogdet(torch.randn(9, 8, 8, generator=g, dtype=dt))
            T = torch.randn(9, 40, 40, generator=g, dtype=dt).triu() + 8 * torch.eye(40)
            la.solve_triangular(T, torch.randn(9, 40, 40, generator=g, dtype=dt), upper=True)
        # float64's blocked factor and step kernels (the unrolled interchange tracking, lu.TRACK_UNROLLED,
        # which float64 skips: beside it Triton 3.6 failed to lower their float64 dots for sm_90, seen
        # compiling "tests:tests/ops/test_linalg_lu.py -k 70-40", not this call's variants)
        la.lu_factor_ex(torch.randn(9, 70, 40, generator=g, dtype=torch.float64))
    if which in ("linalg", "linalg-rest", "all"):
        for dt in (torch.float32, torch.complex64):
            la.qr(torch.randn(9, 24, 16, generator=g, dtype=dt))
        RUN_KERNELS = True  # inv and solve read their info back and raise on a singular (garbage) result
        for n in (3, 4, 16):
            la.inv(torch.randn(9, n, n, generator=g) + 4 * torch.eye(n))
        C = torch.complex(torch.randn(9, 6, 6, generator=g), torch.randn(9, 6, 6, generator=g)) + 4 * torch.eye(6)
        la.inv(C)
        la.solve(C, torch.randn(9, 6, 2, generator=g, dtype=torch.complex64))
        RUN_KERNELS = os.environ.get("COMPILE_RUN_KERNELS") == "1"
        la.pinv(torch.randn(9, 8, 8, generator=g))
        # blocked QR as the GPU runs it (several programs a panel: the interpreter's results are
        # garbage here, one poll of the barrier, but the launches are the GPU's variants)
        from fastpath.ops.linalg import qr_blocked as qb
        saved = qb.rows_per_program, qb.SPIN
        qb.rows_per_program, qb.SPIN = (lambda mp, dev: qb.ROWS), 1
        for dt in (torch.float32, torch.float64):
            la.qr(torch.randn(1, 300, 300, generator=g, dtype=dt))
        qb.rows_per_program, qb.SPIN = saved
    if which == "linalg-gpu":  # the bench's issue-sized calls with the GPU's plans (kernels not run:
        # host loops see garbage, so a call that reads a result back may raise; what it launched is kept)
        L_ = fastpath.linalg

        def R(*s, dt=torch.float32):
            return torch.randn(*s, generator=g, dtype=dt)
        calls = [("inv 4x4", lambda: L_.inv_ex(R(4096, 4, 4))), ("inv 3x3", lambda: L_.inv_ex(R(4096, 3, 3))),
                 ("inv 16x16", lambda: L_.inv_ex(R(4096, 16, 16))),
                 ("inv 16x16 c64", lambda: L_.inv_ex(R(4096, 16, 16, dt=torch.complex64))),
                 ("solve 16x16 k=16", lambda: L_.solve_ex(R(4096, 16, 16), R(4096, 16, 16))),
                 ("solve 16x16 k=16 c64", lambda: L_.solve_ex(R(4096, 16, 16, dt=torch.complex64),
                                                              R(4096, 16, 16, dt=torch.complex64))),
                 ("det 4x4", lambda: L_.det(R(4096, 4, 4))), ("svd 8x8", lambda: L_.svd(R(1000, 8, 8))),
                 ("pinv 8x8", lambda: L_.pinv(R(1000, 8, 8))), ("qr 32x32", lambda: L_.qr(R(1000, 32, 32))),
                 ("qr 64x256x256", lambda: L_.qr(R(64, 256, 256))), ("qr 2048", lambda: L_.qr(R(1, 2048, 2048))),
                 ("solve_triangular 4096x512",
                  lambda: L_.solve_triangular(R(1, 4096, 4096).triu() + 64 * torch.eye(4096), R(1, 4096, 512),
                                              upper=True))]
        for dt in (torch.float32, torch.complex64):
            calls += [(f"lu_factor 64x256 {dt}", lambda dt=dt: L_.lu_factor_ex(R(64, 256, 256, dt=dt))),
                      (f"lu_solve 64x256 {dt}", lambda dt=dt: L_.lu_solve(R(64, 256, 256, dt=dt),
                                                                          torch.ones(64, 256, dtype=torch.int32),
                                                                          R(64, 256, 256, dt=dt))),
                      (f"lu_solve k=1 {dt}", lambda dt=dt: L_.lu_solve(R(64, 256, 256, dt=dt),
                                                                       torch.ones(64, 256, dtype=torch.int32),
                                                                       R(64, 256, 1, dt=dt)))]
            for k in (1, 2, 4):  # torch's factors are column-major (the few form reads them transposed)
                calls.append((f"lu_solve k={k} {dt} column-major", lambda dt=dt, k=k: L_.lu_solve(
                    R(64, 256, 256, dt=dt).mT, torch.ones(64, 256, dtype=torch.int32), R(64, 256, k, dt=dt))))

            def forms_2(dt=dt):  # the inverses' and the few sweep's form 2 (float32's few sweep keeps form 1 by
                # default: its form 2 is compiled here; the others are the defaults since the fifty-second session)
                from fastpath.ops.linalg import triangular as T
                saved = dict(T.DIAG_PLAN), dict(T.FEW_PLAN)
                T.DIAG_PLAN[dt] = (2, 1, 1, T.DIAG_PLAN[dt][3])
                T.FEW_PLAN[dt] = T.FEW_PLAN[dt][:4] + (2,)
                try:
                    for lu_f in (R(64, 256, 256, dt=dt), R(64, 256, 256, dt=dt).mT):
                        L_.lu_solve(lu_f, torch.ones(64, 256, dtype=torch.int32), R(64, 256, 1, dt=dt))
                finally:
                    T.DIAG_PLAN.clear(), T.DIAG_PLAN.update(saved[0]), T.FEW_PLAN.clear(), T.FEW_PLAN.update(saved[1])
            calls.append((f"lu_solve k=1 {dt}, the forms 2", forms_2))
        calls.append(("lu_factor 2048 c64", lambda: L_.lu_factor_ex(R(1, 2048, 2048, dt=torch.complex64))))

        def rotated():  # complex64 row panels rotated with each search a step early (PANEL_ROTATE 2, off) and
            from fastpath.ops.linalg import lu as LU_  # with the search and row in one barrier (3, the GPU's
            # default, which lu._rotation grants only on a CUDA device: the calls above record 1), the pivot
            # row through shared memory: the factor's launch and det's
            saved = LU_.PANEL_ROTATE, LU_.PANEL_SMEM, LU_._rotation, LU_.DEFER_LEFT
            LU_.PANEL_SMEM = True
            LU_._rotation = lambda device, M, W, warps: LU_.PANEL_ROTATE  # (no GPU here to ask)
            try:
                for LU_.PANEL_ROTATE in (2, 3):
                    L_.lu_factor_ex(R(64, 256, 256, dt=torch.complex64))
                    L_.det(R(64, 256, 256, dt=torch.complex64))
                LU_.DEFER_LEFT = True  # (off by default) the left interchanges deferred to the end
                L_.lu_factor_ex(R(64, 256, 256, dt=torch.complex64))
            finally:
                LU_.PANEL_ROTATE, LU_.PANEL_SMEM, LU_._rotation, LU_.DEFER_LEFT = saved
        calls.append(("lu_factor / det 64x256 c64, rotated panels", rotated))
        _record_calls(calls)
    if which == "training-gpu":  # the training bench's calls with the GPU's plans (as linalg-gpu), forward + backward
        E = torch.empty

        def bn(shape, dt, cl=False):
            x = E(shape, dtype=dt)
            x = (x.to(memory_format=torch.channels_last) if cl else x).requires_grad_()
            w, b = torch.ones(shape[1], requires_grad=True), torch.zeros(shape[1], requires_grad=True)
            y = fastpath.batch_norm(x, torch.zeros(shape[1]), torch.ones(shape[1]), w, b, training=True)
            torch.autograd.grad(y, (x, w, b), torch.ones_like(y))

        def grad_of(op, *shape, dt=torch.bfloat16, **kw):
            x = E(shape, dtype=dt).requires_grad_()
            y = op(x, **kw)
            torch.autograd.grad(y, x, torch.ones_like(y))

        calls = [("batch_norm 8192x1024 f32", lambda: bn((8192, 1024), torch.float32)),
                 ("batch_norm 32x256x56x56 bf16", lambda: bn((32, 256, 56, 56), torch.bfloat16)),
                 ("batch_norm 32x256x56x56 bf16 NHWC", lambda: bn((32, 256, 56, 56), torch.bfloat16, True)),
                 ("dropout 64M bf16", lambda: grad_of(fastpath.dropout, 1 << 26, p=0.1))]
        for red in ("none", "mean", "sum"):
            calls.append((f"mse_loss {red}", lambda red=red: grad_of(
                lambda x, **kw: fastpath.mse_loss(x, E(x.shape, dtype=x.dtype), **kw), 8192, 4096, reduction=red)))
        calls.append(("bincount 16M", lambda: fastpath.bincount(torch.zeros(1 << 24, dtype=torch.int64), minlength=1000,
                                                                validate=False)))
        _record_calls(calls)
    if which == "ops-gpu":  # the decode path's other ops at model shapes, with the GPU's plans (as linalg-gpu)
        from fastpath.ops.fp8 import ScalingType
        from fastpath.ops.linear import linear_swiglu
        from fastpath.ops.moe import fused_experts
        E = torch.empty
        bf = torch.bfloat16
        f8 = torch.float8_e4m3fn
        calls = []
        for dt in (bf, torch.float32):
            for n, k in ((4096, 4096), (4096, 14336), (2048, 151936)):
                w = torch.randn(n, k, generator=g).to(dt)
                for m in (1, 4, 16, 64, 512):
                    calls.append((f"linear {m}x{k}x{n} {dt}", lambda m=m, k=k, w=w, dt=dt: fastpath.linear(
                        torch.randn(m, k, generator=g).to(dt), w)))
        w8, s8 = E(14336, 4096, dtype=f8), torch.ones(14336, 1)
        for m in (1, 16, 512):
            calls.append((f"fp8 linear {m} rows",
                          lambda m=m: fastpath.linear(E(m, 4096, dtype=bf), w8, weight_scale=s8)))
            calls.append((f"linear_swiglu {m} rows",
                          lambda m=m: linear_swiglu(E(m, 4096, dtype=bf), E(28672, 4096, dtype=bf))))
        calls.append(("linear_swiglu float32 1 row",  # the float32 one-row plan (matvec.F32_ONE_ROW_GLU)
                      lambda: linear_swiglu(E(1, 4096), E(28672, 4096))))
        tw = ScalingType.TensorWise
        for m in (1, 16, 4096):
            calls.append((f"scaled_mm {m}x4096x4096", lambda m=m: fastpath.scaled_mm(
                E(m, 4096, dtype=f8), E(4096, 4096, dtype=f8).t(), torch.ones(()), tw, torch.ones(()), tw)))
        # Qwen3-30B-A3B's experts: 128 of 768 x 2048, top 8
        gu, dn = E(128, 1536, 2048, dtype=bf), E(128, 2048, 768, dtype=bf)
        gu8, dn8 = E(128, 1536, 2048, dtype=f8), E(128, 2048, 768, dtype=f8)
        for t in (1, 8, 64, 512):
            ids = torch.randint(0, 128, (t, 8), generator=g, dtype=torch.int32)
            wts = torch.full((t, 8), 0.125)
            calls.append((f"fused_experts {t} tokens", lambda t=t, ids=ids, wts=wts: fused_experts(
                E(t, 2048, dtype=bf), ids, wts, gu, dn)))
            calls.append((f"fused_experts fp8 {t} tokens", lambda t=t, ids=ids, wts=wts: fused_experts(
                E(t, 2048, dtype=bf), ids, wts, gu8, dn8, gate_up_scale=torch.ones(128, 1536),
                down_scale=torch.ones(128, 2048))))
        calls.append(("softmax 1x151936", lambda: fastpath.softmax(torch.randn(1, 151936, generator=g), -1)))
        calls.append(("rms_norm", lambda: fastpath.rms_norm(E(16, 4096, dtype=bf), E(4096, dtype=bf))))
        _record_calls(calls)
    if which == "attention":  # decode programs of 64 rows (group x query tokens) and prefill at D 256
        from fastpath.models.transformer import chunk_attention
        E = torch.empty
        for dt in (torch.bfloat16, torch.float32):
            for D in (128, 256):
                q, k = E(1, 64, 16, D, dtype=dt), E(1, 4, 4096, D, dtype=dt)
                for kw in ({}, dict(attn_mask=torch.zeros(1, 64, 16, 4096, dtype=dt)),
                           dict(attn_mask=torch.ones(1, 64, 16, 4096, dtype=torch.bool)),
                           dict(is_causal=True, kv_len=torch.tensor([4000], dtype=torch.int32), window=1024,
                                out_gate=E(1, 64, 16, D, dtype=dt))):
                    fastpath.scaled_dot_product_attention(q, k, k, enable_gqa=True, **kw)
                x = E(1, 8, 1024, D, dtype=dt)
                fastpath.scaled_dot_product_attention(x, x, x, is_causal=True)
                # the engine's prefill: a last chunk of 8 tokens after 512 (models.transformer.chunk_attention),
                # Qwen3.5 / 3.6's 16 query heads over 2 KV heads
                chunk_attention(E(1, 16, 8, D, dtype=dt), E(1, 2, 520, D, dtype=dt), E(1, 2, 520, D, dtype=dt), 512)
    if which in ("batch_norm", "all"):
        for shape, cl in (((4, 6, 5, 7), False), ((4, 6, 5, 7), True), ((33, 20), False)):
            for mode in ({"FUSED": False}, {"FUSED": False, "SPLIT_COMBINE": False},
                         {"FUSED": True, "FUSED_NCHW": True, "FUSED_CL": True}, {"ROWS_2D": True, "ROWS_CL": True}):
                saved = bn.knobs()
                bn.configure(**{**saved, **mode})
                x = torch.randn(shape, generator=g)
                if cl:
                    x = x.to(memory_format=torch.channels_last)
                x.requires_grad_()
                w = torch.ones(shape[1], requires_grad=True)
                y = bn.batch_norm(x, torch.zeros(shape[1]), torch.ones(shape[1]), w, torch.zeros(shape[1]),
                                  training=True)
                y.sum().backward()
                bn.configure(**saved)


def record(which: str, path: str) -> None:
    """Run the calls (in the interpreter, or with the GPU's plans for GPU_PLANS) and pickle what
    each launch needs to compile."""
    import pickle
    L.Launcher.launch = _record
    if which in GPU_PLANS:
        _as_gpu()
    if os.environ.get("COMPILE_SET"):
        from fastpath.bench.__main__ import apply_knobs
        apply_knobs([kv for kv in os.environ["COMPILE_SET"].split(";") if kv.strip()])
    run_calls(which)
    with open(path, "wb") as f:
        pickle.dump(list(_SEEN.values()), f)


#: Parts recorded with the GPU's plans, every variant compiled to a cubin and its shared memory checked.
GPU_PLANS = ("attention", "linalg-gpu", "ops-gpu", "training-gpu")
#: The GPU the GPU-plan parts answer as (``COMPILE_ARCH``, default 90): (capability, multiprocessors,
#: fp8 tensor cores, shared memory one block may take). 90: H100 / H200; 89: RTX 4090 / L40S (Ada);
#: 86: RTX 3090 / A10 (Ampere); 80: A100.
ARCHES = {90: ((9, 0), 132, True, 232448), 89: ((8, 9), 128, True, 101376), 86: ((8, 6), 82, False, 101376),
          80: ((8, 0), 108, False, 166912)}
ARCH = int(os.environ.get("COMPILE_ARCH", "90"))
if ARCH not in ARCHES:
    raise SystemExit(f"COMPILE_ARCH: expected one of {sorted(ARCHES)}, got {ARCH}")
SMEM_LIMIT = ARCHES[ARCH][3]


def _as_gpu() -> None:
    """Plans as on an H200: every fastpath module's INTERPRET off and the backend's device
    queries answered for one (the launches are recorded, never run)."""
    import importlib
    import pkgutil

    from fastpath._core import backend as B
    import fastpath.ops
    cap, sms, fp8, _ = ARCHES[ARCH]
    fake = dict(triton_reason=lambda d: None, num_sms=lambda d: sms, capability=lambda i: cap,
                tma_capable=lambda i: cap >= (9, 0), tma_on=lambda d: cap >= (9, 0), fp8_hardware=lambda d: fp8,
                pdl_on=lambda i: False)
    for m in pkgutil.walk_packages(fastpath.ops.__path__, "fastpath.ops."):
        importlib.import_module(m.name)
    for name, mod in list(sys.modules.items()):
        if not name.startswith("fastpath") or mod is None or name == "fastpath._core.launch":
            continue
        if getattr(mod, "INTERPRET", None) is True:
            mod.INTERPRET = False
        for n, f in fake.items():
            if n in vars(mod) and (mod is B or callable(vars(mod)[n])):
                setattr(mod, n, f)


#: Kernels whose SASS loops are listed (``COMPILE_LOOPS``: a substring of their names).
LOOPS = os.environ.get("COMPILE_LOOPS", "")
#: Seconds one compile may take (a worker process is replaced after).
TIMEOUT_S = 120


def sass_loops(sass: str) -> list:
    """``(first address, last address, instructions)`` of each loop (a backward branch) in
    ``cuobjdump -sass`` output."""
    import re
    ins = _addressed(sass)
    out = []
    for a, text in ins:
        m = re.search(r"BRA .*?0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a:
            first = int(m.group(1), 16)
            out.append((first, a, [t for b, t in ins if first <= b <= a]))
    return out


def loop_report(cubin: bytes) -> list:
    """The cubin's registers and local memory a thread (a line), then each loop of
    :func:`sass_loops` in order: (depth, instructions an iteration of its own, {opcode: count}),
    its own being those outside the loops nested in it; read with the cuobjdump Triton ships."""
    import collections
    import re
    import subprocess
    import tempfile

    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=True).stdout
        usage = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    regs = re.search(r"REG:(\d+).*?LOCAL:(\d+)", usage)
    spans, ins = sass_loops(sass), _addressed(sass)
    loops = []
    for a, b, _ in spans:
        inner = [(c, d) for c, d, _ in spans if a <= c and d <= b and (c, d) != (a, b)]
        own = [t for addr, t in ins if a <= addr <= b and not any(c <= addr <= d for c, d in inner)]
        depth = sum(1 for c, d, _ in spans if c <= a and b <= d and (c, d) != (a, b))
        ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in own)
        loops.append((depth, len(own), dict(ops.most_common())))
    return [(f"{regs.group(1)} registers, {regs.group(2)} B of local memory (spills), " if regs else "")
            + f"{len(ins)} instructions in all", *loops]


def _addressed(sass: str) -> list:
    """(address, instruction) of each instruction of ``cuobjdump -sass`` output."""
    import re
    return [(int(m.group(1), 16), m.group(2)) for m in
            (re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", ln) for ln in sass.splitlines()) if m]


def _loop_lines(found) -> str:
    usage, *loops = found
    keys = ("BAR", "SHFL", "LDS", "STS", "LDG", "STG", "MUFU", "FFMA") + tuple(
        k for k in os.environ.get("COMPILE_LOOP_OPS", "").split(",") if k)
    return f"\n      {usage}" + "".join(
        f"\n      {'  ' * depth}loop (depth {depth}): {n} instructions an iteration of its own; "
        + ", ".join(f"{k} {ops.get(k, 0)}" for k in keys) for depth, n, ops in loops)


def _lower(src, target, opts, last: str) -> None:
    """Triton's own pipeline for ``src`` up to and including stage ``last`` (``ttgir``: the
    front end and the GPU layout passes, where the interpreter's and the compiler's accepted
    code differ; LLVM and ptxas are three quarters of a compile's time)."""
    from triton._C.libtriton import ir
    from triton.compiler import compiler as tc
    backend = tc.make_backend(target)
    options = backend.parse_options(opts)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                         context)
    metadata: dict = {}
    for name, stage in stages.items():
        module = stage(module, metadata)
        if name == last:
            return
    raise ValueError(f"stage {last!r} not in {list(stages)}")


def _compile_one(item, full: bool = True, smem: bool = False):
    """(Worker) compile one recorded variant for sm_90 (``full``: to a cubin, else to TTGIR):
    ``(error or None, shared memory bytes or None, pipeline stages, SASS loops or "")``
    (``smem``: shared memory past SMEM_LIMIT is compiled again with fewer stages, as fastpath's
    Launcher does at launch, and is an error at one stage)."""
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    name, sig, consts, attrs, opts = item
    if os.environ.get("COMPILE_PDL") and "PDL" in sig:  # the GPU's PDL mode, not the interpreter's 0
        consts = {**consts, (list(sig).index("PDL"),): int(os.environ["COMPILE_PDL"])}
    mod, fname = name.rsplit(".", 1)
    fn = getattr(importlib.import_module(mod), fname)
    sig_names = list(sig)
    src, target = ASTSource(fn, sig, constexprs=consts, attrs=attrs), GPUTarget("cuda", ARCH, 32)
    from triton.compiler import compiler as tc
    looked = bool(LOOPS) and LOOPS in name
    if looked or not all(hasattr(tc, n) for n in ("make_backend", "ir")):  # (another Triton's internals)
        full = True
    try:
        if not full:
            _lower(src, target, opts, "ttgir")
            return None, None, None, ""
        kernel = triton.compile(src, target=target, options=opts)
        shared = kernel.metadata.shared
        loops = _loop_lines(loop_report(kernel.asm["cubin"])) if looked else ""
        if looked and os.environ.get("COMPILE_DUMP"):  # the variant's TTGIR and PTX, named by its constexprs' hash
            import hashlib
            tag = f"{fname}-{hashlib.md5(repr(sorted(consts.items())).encode()).hexdigest()[:8]}"
            for ext in ("ttgir", "ptx"):
                with open(os.path.join(os.environ["COMPILE_DUMP"], f"{tag}.{ext}"), "w") as f:
                    f.write(kernel.asm[ext])
            loops = f" -> {tag}.ttgir / .ptx" + loops
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        cause = exc.__cause__ or exc.__context__  # a CompilationError's own message is the source line: the
        while cause is not None and (cause.__cause__ or cause.__context__):  # innermost cause says why
            cause = cause.__cause__ or cause.__context__
        why = f" (caused by {type(cause).__name__}: {' '.join(str(cause).split())[-300:]})" if cause else ""
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[-300:]}{why}", None, None, ""
    stages = opts.get("num_stages") or 3
    if smem and shared > SMEM_LIMIT and stages > 1:  # as fastpath's Launcher does at launch: fewer stages
        return _compile_one((name, sig, consts, attrs, {**opts, "num_stages": stages - 1}), full, smem)
    if smem and shared > SMEM_LIMIT:
        named = {sig_names[k[0]]: v for k, v in consts.items() if len(k) == 1 and sig_names[k[0]].isupper()}
        return (f"OutOfResources at launch: {shared} B of shared memory at one stage, {SMEM_LIMIT} on sm_{ARCH} "
                f"({opts}; {named})", shared, stages, "")
    return None, shared, stages, loops


def main() -> int:
    import pickle
    import subprocess
    import tempfile

    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    parts = ("linalg", "linalg-lu", "linalg-rest", "batch_norm", "all") + GPU_PLANS
    if which not in parts and not which.startswith("tests:"):
        raise SystemExit(f"which: expected one of {', '.join(parts)} or tests:PATH, got {which!r}")
    if len(sys.argv) > 2:  # the recording run
        record(which, sys.argv[2])
        return 0
    gpu = which in GPU_PLANS  # (recorded without the interpreter: its import-time constants are the GPU's)
    env = {k: v for k, v in os.environ.items() if not (gpu and k == "TRITON_INTERPRET")}
    env.update({} if gpu else {"TRITON_INTERPRET": "1"})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "launches.pkl")
        subprocess.run([sys.executable, __file__, which, path], check=True,
                       env={**env, "PYTHONPATH": os.environ.get("RECORD_PYTHONPATH", os.environ.get("PYTHONPATH", ""))})
        with open(path, "rb") as f:
            seen = pickle.load(f)
    if not seen:  # nothing recorded is a broken recording, not a pass
        print(f"FAIL  {which}: no kernel launch was recorded")
        return 1
    import multiprocessing as mp

    import triton
    bad = 0
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(1)
    full_all = os.environ.get("COMPILE_FULL") == "1" or gpu
    compiled: set = set()  # kernels one variant of which went through to a cubin
    most = (0, "")  # the largest shared memory a compiled variant takes (at its own stages), and its kernel
    fallbacks = 0  # variants that fit only with fewer pipeline stages (launch.Launcher._first)
    for item in seen:
        name = item[0]
        full = full_all or name not in compiled
        compiled.add(name)
        t0 = time.perf_counter()
        try:
            err, shared, stages, loops = pool.apply_async(_compile_one, (item, full, gpu)).get(timeout=TIMEOUT_S)
        except mp.TimeoutError:  # Triton's passes can loop on a shape: report it, go on
            pool.terminate()
            pool = ctx.Pool(1)
            err, shared, stages, loops = f"no result after {TIMEOUT_S} s", None, None, ""
        if err:
            bad += 1
            print(f"FAIL  {name}: {err}", flush=True)
        else:
            fewer = stages is not None and stages < (item[4].get("num_stages") or 3)
            fallbacks += fewer
            size = (f", {shared} B shared" if shared is not None else "") + (f" at {stages} stages" if fewer else "")
            print(f"ok    {name} ({'cubin' if full else 'ttgir'}{size}, {time.perf_counter() - t0:.1f} s)", flush=True)
            if loops:
                named = {list(item[1])[k[0]]: v for k, v in item[2].items() if len(k) == 1}
                print(f"      {named} {item[4]}{loops}", flush=True)
        if shared is not None and not err:
            most = max(most, (shared, name))
    pool.terminate()
    print(f"triton {triton.__version__}: {len(seen) - bad}/{len(seen)} kernel variants compile for sm_{ARCH}"
          + (f"; most shared memory: {most[0]} B ({most[1]})" if most[1] else "")
          + (f"; {fallbacks} with fewer pipeline stages" if fallbacks else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
