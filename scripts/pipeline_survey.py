"""Offline survey, without a GPU, of which kernel loops Triton 3.6 software-pipelines on the H200 (sm_90).

Triton 3.6 pipelines (cp.async into multi-buffered shared memory) only the loads of a loop that
feed a ``tl.dot``, unless the loop names its stages (``tl.range(lo, hi, step, num_stages=N)``); a
loop whose loads feed elementwise math or reductions waits a full DRAM latency every trip. Two phases:

1. record (a child process, ``TRITON_INTERPRET=1``, the venv's Triton: 3.6's interpreter fails on
   this numpy): run CPU tests in-process under pytest with ``InterpretedFunction.run`` patched, the
   one door every interpreted launch goes through (``kernel[grid](...)``, Launcher or not); each
   launch is kept by (kernel, constexpr values, tensor dtypes, options), the best-aligned one of each.
2. compile (this process, run with ``PYTHONPATH=/work/tri36:src`` for the H200's Triton 3.6): rebuild
   each launch's signature as Triton's launcher specialises it (``native_specialize_impl`` on
   stand-ins: dtype, 16-byte alignment, ints equal to 1 or divisible by 16), compile for sm_90 and
   count, per loop of the PTX, instructions, ``ld.global`` and ``cp.async`` (cp.async.ca/cg and
   cp.async.bulk.tensor). A loop with ld.global and no cp.async is flagged UNPIPELINED.

Caveats: launches use the interpreter's block sizes (ops pick small INTERPRET blocks, some pick
float32 or num_stages=1 there); "small-tile" counts variants whose BLOCK*/CHUNK*/TILE* constexprs
multiply to fewer elements than threads, too small to judge (see small()).

    PYTHONPATH=/work/tri36:src python scripts/pipeline_survey.py [--tests tests/ops/test_norm.py ...]
        [-k EXPR] [--json survey.json] [--records rec.json [--reuse]]
"""
import argparse
import importlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- phase 1: record
def _const(v):
    """JSON form of a constexpr value: a dtype, a JIT function, a tuple, or a plain value."""
    import triton.language as tl
    v = v.value if isinstance(v, tl.constexpr) else v
    if isinstance(v, tl.dtype):
        return {"dtype": v.name}
    if isinstance(v, (tuple, list)):
        return {"tuple": [_const(x) for x in v]}
    if callable(getattr(v, "fn", None)):  # an InterpretedFunction / JITFunction passed as constexpr
        return {"fn": [v.fn.__module__, v.fn.__qualname__]}
    return v if v is None or isinstance(v, (bool, int, float, str)) else {"repr": repr(v)}


def _arg(v):
    """JSON form of a runtime argument: what Triton specialises a launch on, and the strides."""
    import torch
    if isinstance(v, torch.Tensor):
        return {"tensor": str(v.dtype)[6:], "aligned": v.data_ptr() % 16 == 0, "strides": list(v.stride())}
    if hasattr(v, "block_shape") and hasattr(v, "base"):  # a host TensorDescriptor
        return {"desc": str(v.base.dtype)[6:], "block": [int(b) for b in v.block_shape],
                "aligned": v.base.data_ptr() % 16 == 0, "strides": [int(s) for s in v.strides]}
    if isinstance(v, int) and not isinstance(v, bool):
        return {"value": v, "div16": v % 16 == 0}
    if v is None or isinstance(v, (bool, float)):
        return {"value": v}
    return {"repr": repr(v)}


def record(tests, kexpr, out):
    import pytest
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import _normalize_ty  # what the interpreter itself uses to spot constexprs
    seen = {}
    orig = InterpretedFunction.run

    def note(fn, args, kwargs):
        sig = inspect.signature(fn)
        opts = {k: kwargs.pop(k) for k in list(kwargs) if k not in sig.parameters}  # num_warps, ...
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        consts, rt = {}, {}
        for name, v in bound.arguments.items():
            if _normalize_ty(sig.parameters[name].annotation) == "constexpr":
                consts[name] = _const(v)
            else:
                rt[name] = _arg(v)
        dtypes = [a.get("tensor") or a.get("desc") for a in rt.values()]
        key = json.dumps([fn.__module__, fn.__qualname__, consts, dtypes, opts], sort_keys=True, default=repr)
        # the launch nearest to a production one: aligned tensors, ints divisible by 16 or equal to 1
        score = sum(bool(a.get("aligned") or a.get("div16") or a.get("value") == 1) for a in rt.values())
        old = seen.get(key)
        if old is None or score > old["score"]:
            seen[key] = dict(name=fn.__name__, module=fn.__module__, qualname=fn.__qualname__,
                             file=os.path.relpath(inspect.getsourcefile(fn), REPO), constexprs=consts,
                             args=rt, options={k: _const(v) for k, v in opts.items()}, score=score,
                             launches=old["launches"] if old else 0)
        seen[key]["launches"] += 1

    def run(self, *args, grid, warmup, **kwargs):
        try:
            note(self.fn, args, dict(kwargs))
        except Exception as e:  # never let the survey break a test
            print(f"pipeline_survey: not recorded {self.fn.__name__}: {e!r}", file=sys.stderr)
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = run
    rc = pytest.main([*tests, "-q", "-p", "no:cacheprovider", *(["-k", kexpr] if kexpr else [])])
    Path(out).write_text(json.dumps(list(seen.values()), indent=1))
    print(f"pipeline_survey: pytest exit {int(rc)}, {len(seen)} kernel variants recorded", file=sys.stderr)


# ---------------------------------------------------------------------------- phase 2: compile
def _import(module, qualname):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)  # a kernel made inside a function ("<locals>") fails here
    return obj


def _value(c):
    """A constexpr value back from its JSON form."""
    import triton.language as tl
    if not isinstance(c, dict):
        return c
    if "dtype" in c:
        return tl.dtype(c["dtype"])
    if "tuple" in c:
        return tuple(_value(x) for x in c["tuple"])
    if "fn" in c:
        return _import(*c["fn"])
    raise ValueError(f"cannot rebuild constexpr {c}")


def compile_variant(rec):
    """The compiled kernel of one recorded launch, specialised as Triton 3.6 would on the GPU."""
    import torch
    import triton
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend, CUDAOptions
    from triton.compiler import ASTSource
    fn = _import(rec["module"], rec["qualname"])
    sig, consts, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        if p.name in rec["constexprs"]:
            sig[p.name], consts[(i,)] = "constexpr", _value(rec["constexprs"][p.name])
            continue
        a = rec["args"][p.name]
        if "repr" in a:
            raise ValueError(f"argument {p.name} not rebuilt: {a['repr']}")
        # a tensor's stand-in: Triton's specialiser reads only its dtype and data_ptr()
        stand_in = SimpleNamespace(dtype=getattr(torch, a.get("tensor") or a.get("desc")),
                                   data_ptr=lambda a=a: 16 if a["aligned"] else 8) if "aligned" in a else a["value"]
        ty, attr = native_specialize_impl(CUDABackend, stand_in, False, not p.do_not_specialize,
                                          not p.do_not_specialize_on_alignment)
        if "desc" in a:  # Triton names a descriptor by element type and block shape only
            ty, attr = f"tensordesc<{ty[1:]}{a['block']}>", None
        sig[p.name] = ty
        if ty == "constexpr":  # ints equal to 1, and None
            consts[(i,)] = a["value"]
        if isinstance(attr, str):
            attrs[(i,)] = CUDABackend.parse_attr(attr)
    opts = {k: _value(v) for k, v in rec["options"].items() if k in CUDAOptions.__dataclass_fields__}
    return triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                          options=opts)


def survey_variant(rec, timeout):
    """(shared bytes, loop_stats) of one variant, compiled in a forked child that is killed after
    ``timeout`` seconds (Triton 3.6's LoopAwareCSE pass can take forever); raises on failure."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")  # cheap: the child inherits torch, Triton, fastpath
    recv, send = ctx.Pipe(duplex=False)

    def work():
        try:
            k = compile_variant(rec)
            send.send((k.metadata.shared, loop_stats(k.asm["ptx"])))
        except Exception as e:
            msg = str(e).strip().splitlines()
            send.send(f"{type(e).__name__}: {msg[-1] if msg else ''}"[:300])

    child = ctx.Process(target=work)
    child.start()
    out = recv.recv() if recv.poll(timeout) else f"timeout: no result in {timeout} s"
    child.kill()
    child.join()
    if isinstance(out, str):
        raise RuntimeError(out)
    return out


def loops(ptx: str) -> list:
    """Instruction lists of the loops (a label that a later branch jumps back to), in order
    (as in scripts/loop_instructions.py; an outer loop's list holds its inner loops)."""
    lines = ptx.split("\n")
    labels = {ln.split(":")[0]: i for i, ln in enumerate(lines) if re.match(r"^\$L__BB\d+_\d+:", ln)}
    found = []
    for i, ln in enumerate(lines):
        m = re.search(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ln)
        if m and labels.get(m.group(1), i) < i:
            found.append([x.strip() for x in lines[labels[m.group(1)]:i]
                          if x.strip() and not x.strip().startswith(("$", "//", "{", "}", "."))])
    return found


def loop_stats(ptx: str) -> list:
    rows = []
    for n, body in enumerate(loops(ptx)):
        ops = [x.split()[1] if x.startswith("@") else x.split()[0] for x in body]  # past any predicate
        ld = [o for o in ops if o.startswith("ld.global")]
        cp = sum(o.startswith(("cp.async.ca", "cp.async.cg")) for o in ops)
        tma = sum(o.startswith("cp.async.bulk.tensor") for o in ops)
        rows.append(dict(loop=n, instructions=len(body), ld_global=len(ld),
                         ld_global_vector=sum(bool(re.search(r"\.v\d", o)) for o in ld), cp_async=cp + tma, tma=tma,
                         unpipelined=bool(ld) and not cp + tma))
    return rows


def small(rec) -> bool:
    """The tile, the product of the int constexprs named BLOCK*/CHUNK*/TILE*, has fewer elements
    than the program has threads (num_warps * 32), so threads hold copies: too small to judge."""
    sizes = [v for n, v in rec["constexprs"].items() if n.startswith(("BLOCK", "CHUNK", "TILE"))
             and isinstance(v, int) and not isinstance(v, bool)]
    return bool(sizes) and math.prod(sizes) < 32 * rec["options"].get("num_warps", 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", nargs="+", default=["tests/ops"], help="pytest paths / node ids")
    ap.add_argument("-k", help="pytest -k expression")
    ap.add_argument("--json", help="write the full survey here")
    ap.add_argument("--records", help="launch records file (default: a temporary file)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds a variant may compile")
    ap.add_argument("--reuse", action="store_true", help="skip the tests, read --records")
    ap.add_argument("--record-pythonpath", default=str(REPO / "src"),
                    help="PYTHONPATH of the recording child (default: src, so the venv's Triton)")
    ap.add_argument("--record-phase", help=argparse.SUPPRESS)  # internal: be the recording child
    args = ap.parse_args()
    if args.record_phase:
        return record(args.tests, args.k, args.record_phase)

    records = args.records or tempfile.mkstemp(suffix=".json", prefix="pipeline_survey_")[1]
    if not args.reuse:
        env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": args.record_pythonpath}
        cmd = [sys.executable, __file__, "--record-phase", records, "--tests", *args.tests]
        subprocess.run(cmd + (["-k", args.k] if args.k else []), cwd=REPO, env=env, stdout=sys.stderr, check=True)
    import triton
    assert os.environ.get("TRITON_INTERPRET", "0") in ("", "0"), "the compile phase needs TRITON_INTERPRET unset"
    recs = sorted(json.loads(Path(records).read_text()), key=lambda r: (r["name"], r["file"]))
    print(f"triton {triton.__version__}, sm_90; {len(recs)} kernel variants from {records}", file=sys.stderr)
    kernels = {}  # (name, file) -> {"variants": [...], "failed": [...], "loops": {index: [(row, small)]}}
    for rec in recs:
        kern = kernels.setdefault((rec["name"], rec["file"]), {"variants": [], "failed": [], "loops": {}})
        try:
            (rec["shared"], rec["loops"]), rec["small"] = survey_variant(rec, args.timeout), small(rec)
        except RuntimeError as e:  # report, keep going
            rec["error"] = str(e)
            kern["failed"].append(rec)
            print(f"  {rec['name']}: {e}", file=sys.stderr)
            continue
        kern["variants"].append(rec)
        for r in rec["loops"]:
            kern["loops"].setdefault(r["loop"], []).append((r, rec["small"]))

    def span(rows, key):
        lo, hi = min(r[key] for r, _ in rows), max(r[key] for r, _ in rows)
        return f"{lo}" if lo == hi else f"{lo}-{hi}"

    # one line per (kernel, loop that loads); ranges over the kernel's compiled variants
    print(f"\n{'kernel':30s} {'file':34s} {'vars':>4s} {'shared':>6s} {'loop':>4s} {'instr':>9s} {'ld.gl':>6s} "
          f"{'vec':>5s} {'cp.as':>5s}  UNPIPELINED in / notes")
    flagged = []
    for (name, file), kern in sorted(kernels.items()):
        vs = kern["variants"]
        head = f"{name:30s} {file.removeprefix('src/fastpath/'):34s} {len(vs):4d} " + \
            (f"{max(v['shared'] for v in vs):6d}" if vs else f"{'':6s}")
        fail = f"  {len(kern['failed'])} failed to compile" if kern["failed"] else ""
        busy = {n: rows for n, rows in sorted(kern["loops"].items())
                if any(r["ld_global"] or r["cp_async"] for r, _ in rows)}
        if not busy:
            print(f"{head} {'-':>4s}  (no loop loads){fail}")
        for n, rows in busy.items():
            bad = [(r, s) for r, s in rows if r["unpipelined"]]
            notes = [f"{len(bad)}/{len(rows)} variants" if bad else ""]
            notes += ["tma" if any(r["tma"] for r, _ in rows) else "",
                      f"{sum(s for _, s in bad)} small-tile" if any(s for _, s in bad) else ""]
            print(f"{head} {n:4d} {span(rows, 'instructions'):>9s} {span(rows, 'ld_global'):>6s} "
                  f"{span(rows, 'ld_global_vector'):>5s} {span(rows, 'cp_async'):>5s}  "
                  f"{', '.join(x for x in notes if x)}{fail}")
            if bad:
                flagged.append((name, file, n, len(bad), len(vs), span(bad, "instructions"), span(bad, "ld_global")))

    print("\nUNPIPELINED loops (ld.global, no cp.async):")
    for name, file, n, nb, nv, ins, ld in flagged:
        print(f"  {name:30s} {file:42s} loop {n}: {ins:>9s} instr, {ld:>5s} ld.global  ({nb}/{nv} variants)")
    failed = [rec for kern in kernels.values() for rec in kern["failed"]]
    print(f"\ncompile failures: {len(failed)} of {len(recs)} variants")
    for rec in failed:
        print(f"  {rec['name']} ({rec['file']}): {rec['error']}")
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1, default=repr))


if __name__ == "__main__":
    main()
