"""Out-of-bounds checks for Triton's interpreter (on while :data:`ACTIVE`: for every test run in the
interpreter unless ``FASTPATH_BOUNDS=0``; :func:`checking` for one test whatever the setting): every load,
store and atomic a kernel program runs must lie inside
the storage of a tensor passed to that kernel; else :class:`BoundsError`, naming the kernel and how far
outside the first stray access lies.

On a GPU a read past an allocation faults only where no mapped page follows it (the blocked LU read rows
past m, which faulted for 4096 float32 48x48 matrices and for no smaller batch, fifty-sixth session); the
interpreter reads whatever lies there and the result stays right, so no value check sees it. This one
does, on every size the tests run. It patches the interpreter's internals (triton 3.6-3.9); where they
are not as expected it says so and checks nothing.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

#: Checks on (the whole suite with them: 605 s on 2 cores, about what it takes without; the patches cost
#: nothing while this is False)
ACTIVE = os.environ.get("FASTPATH_BOUNDS", "1") == "1"

#: (kernel name, [(lo, hi) byte ranges of its tensors' storages]) of the kernels running, innermost last
_RUNNING: list = []


class BoundsError(AssertionError):
    pass


def _ranges(values) -> list:
    out = []

    def visit(a):
        if isinstance(a, (tuple, list)):
            for x in a:
                visit(x)
        elif hasattr(a, "untyped_storage"):
            st = a.untyped_storage()
            out.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        elif hasattr(getattr(a, "base", None), "untyped_storage"):  # a tensor descriptor
            visit(a.base)
    for v in values:
        visit(v)
    return out


def _check(interp, ptrs, mask, what: str) -> None:
    if not (ACTIVE and _RUNNING):
        return
    name, ranges = _RUNNING[-1]
    addrs = np.asarray(ptrs.data).astype(np.uint64)
    if mask is not None:
        addrs = addrs[np.broadcast_to(np.asarray(mask.data, dtype=bool), addrs.shape)]
    addrs = addrs.ravel()
    if addrs.size == 0:
        return
    size = np.dtype(interp._get_np_dtype(ptrs.get_element_ty())).itemsize
    ok = np.zeros(addrs.shape, dtype=bool)
    for lo, hi in ranges:
        ok |= (addrs >= lo) & (addrs + size <= hi)
    if ok.all():
        return
    bad = addrs[~ok]
    first = int(bad[0])
    lo, hi = min(ranges, key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
    where = f"{first + size - hi} bytes past the end" if first >= lo else f"{lo - first} bytes before the start"
    raise BoundsError(f"{name}: a {what} of {bad.size} element(s) outside every tensor passed to it; the first "
                      f"{where} of the tensor storage [{lo:#x}, {hi:#x}) ({len(ranges)} tensors)")


def install() -> bool:
    """Patch the interpreter (once); False (with a warning) where its internals differ."""
    import warnings
    try:
        from triton.runtime import interpreter as interp
        executor, builder = interp.GridExecutor, interp.InterpreterBuilder
        init, call = executor._init_args_hst, executor.__call__
        load, store = builder.create_masked_load, builder.create_masked_store
        rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas
        interp._get_np_dtype  # noqa: B018 - present
    except AttributeError as exc:
        warnings.warn(f"FASTPATH_BOUNDS: this triton's interpreter differs ({exc}); no bounds checks")
        return False
    if getattr(executor, "_fastpath_bounds", False):
        return True

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        if ACTIVE:
            _RUNNING.append((getattr(self.fn, "__name__", "kernel"),
                             _ranges(args_hst) + _ranges(kwargs_hst.values())))
        return args_hst, kwargs_hst

    def run(self, *args, **kwargs):
        depth = len(_RUNNING)
        try:
            return call(self, *args, **kwargs)
        finally:
            del _RUNNING[depth:]

    def masked_load(self, ptrs, mask, *args, **kwargs):
        _check(interp, ptrs, mask, "load")
        return load(self, ptrs, mask, *args, **kwargs)

    def masked_store(self, ptrs, value, mask, *args, **kwargs):
        _check(interp, ptrs, mask, "store")
        return store(self, ptrs, value, mask, *args, **kwargs)

    def atomic_rmw(self, op, ptr, val, mask, *args, **kwargs):
        _check(interp, ptr, mask, "atomic")
        return rmw(self, op, ptr, val, mask, *args, **kwargs)

    def atomic_cas(self, ptr, *args, **kwargs):
        _check(interp, ptr, None, "atomic")
        return cas(self, ptr, *args, **kwargs)

    executor._init_args_hst, executor.__call__ = init_args, run
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = atomic_rmw, atomic_cas
    executor._fastpath_bounds = True
    return True


@contextlib.contextmanager
def checking():
    """Bounds checks on inside the block (the patches installed first); BoundsError where a kernel strays."""
    global ACTIVE
    if not install():
        raise RuntimeError("FASTPATH_BOUNDS: this triton's interpreter cannot be checked")
    saved, ACTIVE = ACTIVE, True
    try:
        yield
    finally:
        ACTIVE = saved
