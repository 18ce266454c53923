"""Which compiled kernels spill registers on this GPU: runs ``python -m fastpath.bench`` with the
given arguments (the bench's own plans and shapes), then lists every kernel variant the
fastpath launchers compiled with its registers, spilled bytes and shared memory, worst first.
A kernel that ptxas squeezes into few registers with a large stack can run 20x slower than
it should (the chunked gated delta rule at 64-token chunks: 32 registers, 7.8 KB of stack).

    PYTHONPATH=src python3 scripts/spill_report.py recurrent --quick [--only TEXT]
    PYTHONPATH=src python3 scripts/spill_report.py --engine qwen3-30b-a3b,qwen3.6-35b-a3b [--fp8]

``--engine NAMES``: also run the decode engine on those named configs (random weights, the
first 4 layers, a 64-token prompt, 8 new tokens), so that its prefill and decode kernels are
compiled with their own plans; ``--fp8`` with FP8 weights. (The bench-only mode ran on the
H200 at 132a4c1, ``--engine`` at b709e82: ``bench/results/tuning/2026-12-01-spill-engine-b709e82.log``.)
"""
import importlib
import pkgutil


def compiled_kernels():
    """(kernel name, n_regs, n_spills, shared bytes, num_warps) of every kernel a fastpath
    ``Launcher`` holds."""
    import fastpath.ops as ops
    from fastpath._core.launch import Launcher
    found = {}  # id -> compiled kernel (a kernel may sit under several keys)
    for info in pkgutil.walk_packages(ops.__path__, "fastpath.ops."):
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a module that does not import here is not ours to judge
            continue
        for obj in vars(mod).values():
            if isinstance(obj, Launcher):
                found.update((id(kernel), kernel) for kernel, _ in obj.kernels.values())
    rows = []
    for kernel in found.values():
        kernel._init_handles()
        meta = kernel.metadata
        rows.append((meta.name, kernel.n_regs, kernel.n_spills, meta.shared, meta.num_warps))
    return rows


def run_engine(names: str, fp8: bool) -> None:
    """A short engine run per named config, so that its kernels compile with the engine's plans."""
    from fastpath.engine import bench
    from fastpath.models.config import named
    for name in names.split(","):
        cfg = named(name)
        model = bench.random_model(cfg.with_layers(min(4, cfg.num_layers)), device="cuda", fp8=fp8)
        bench.run(model, prompt_len=64, new_tokens=8)
        print(f"engine {name}{' fp8' if fp8 else ''}: ran", flush=True)
        del model


def main():
    import argparse

    from fastpath.bench.__main__ import main as bench
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--fp8", action="store_true")
    args, bench_argv = ap.parse_known_args()
    if bench_argv or args.engine is None:
        bench(bench_argv)
    if args.engine:
        run_engine(args.engine, args.fp8)
    rows = sorted(compiled_kernels(), key=lambda r: (-r[2], r[1]))
    print(f"\n{len(rows)} compiled kernel variants (registers, spilled bytes, shared memory, warps):")
    for name, regs, spills, shared, warps in rows:
        flag = "  <-- spills" if spills else ""
        print(f"  {name:40s} regs {regs:4d}  spills {spills:6d}  smem {shared:7d}  warps {warps}{flag}")


if __name__ == "__main__":
    main()
