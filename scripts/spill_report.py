"""Which compiled kernels spill registers on this GPU: runs ``python -m fastpath.bench`` with the
given arguments (the bench's own plans and shapes), then lists every kernel variant the
fastpath launchers compiled with its registers, spilled bytes and shared memory, worst first.
A kernel that ptxas squeezes into few registers with a large stack can run 20x slower than
it should (the chunked gated delta rule at 64-token chunks: 32 registers, 7.8 KB of stack).

    PYTHONPATH=src python3 scripts/spill_report.py recurrent --quick [--only TEXT]
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


def main():
    from fastpath.bench.__main__ import main as bench
    bench(sys.argv[1:])
    rows = sorted(compiled_kernels(), key=lambda r: (-r[2], r[1]))
    print(f"\n{len(rows)} compiled kernel variants (registers, spilled bytes, shared memory, warps):")
    for name, regs, spills, shared, warps in rows:
        flag = "  <-- spills" if spills else ""
        print(f"  {name:40s} regs {regs:4d}  spills {spills:6d}  smem {shared:7d}  warps {warps}{flag}")


if __name__ == "__main__":
    main()
