"""Which compiled kernels spill registers on this GPU: runs ``python -m fastpath.bench`` with the
given arguments (the bench's own plans and shapes), then lists every kernel variant the
fastpath launchers compiled with its registers, spilled bytes and shared memory, worst first.
A kernel that ptxas squeezes into few registers with a large stack can run 20x slower than
it should (the chunked gated delta rule at 64-token chunks: 32 registers, 7.8 KB of stack).

    PYTHONPATH=src python3 scripts/spill_report.py recurrent --quick [--only TEXT]
    PYTHONPATH=src python3 scripts/spill_report.py --engine qwen3-30b-a3b,qwen3.6-35b-a3b [--fp8] [bench args]

``--engine NAMES``: also run the decode engine on those named configs (random weights, the
first 4 layers, a 64-token prompt, 8 new tokens), so that its prefill and decode kernels are
compiled with their own plans; ``--fp8`` with FP8 weights.
"""
import importlib
import pkgutil
import sys


def compiled_kernels():
    """(kernel name, n_regs, n_spills, shared bytes, num_warps) of every kernel a fastpath
    ``Launcher`` holds."""
    import fastpath.ops as ops
    from fastpath._core.launch import Launcher
    names = [m.name for m in pkgutil.walk_packages(ops.__path__, "fastpath.ops.")]
    seen = []
    for name in names:
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that does not import here is not ours to judge
            continue
        for obj in vars(mod).values():
            if isinstance(obj, Launcher):
                for kernel, _ in obj.kernels.values():
                    if id(kernel) in {id(k) for k, *_ in seen}:
                        continue
                    kernel._init_handles()
                    meta = kernel.metadata
                    seen.append((kernel, meta.name, kernel.n_regs, kernel.n_spills, meta.shared, meta.num_warps))
    return [s[1:] for s in seen]


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
    from fastpath.bench.__main__ import main as bench
    argv = list(sys.argv[1:])
    fp8 = "--fp8" in argv
    if fp8:
        argv.remove("--fp8")
    engine = None
    if "--engine" in argv:
        at = argv.index("--engine")
        engine = argv[at + 1]
        del argv[at:at + 2]
    if argv or engine is None:
        bench(argv)
    if engine:
        run_engine(engine, fp8)
    rows = sorted(compiled_kernels(), key=lambda r: (-r[2], r[1]))
    print(f"\n{len(rows)} compiled kernel variants (registers, spilled bytes, shared memory, warps):")
    for name, regs, spills, shared, warps in rows:
        flag = "  <-- spills" if spills else ""
        print(f"  {name:40s} regs {regs:4d}  spills {spills:6d}  smem {shared:7d}  warps {warps}{flag}")


if __name__ == "__main__":
    main()
