"""Replay of an eager call's launches: the host path of a small op without its Python.

An eager ``fastpath.linear`` spends ~60-100 us of host time a call on a slow host (argument
checks, the plan, argument lists, the Launcher's specialisation key), where the kernel of a
decode-sized layer runs 5-30 us. Calls whose tensors have the properties of an earlier call
(shape, strides, dtype, device, current stream, 16-byte alignment of every pointer) take the
same checks, the same plan and the same compiled kernels, so :class:`LaunchMemo` records the
first such call's launches and replays them for the next ones with the new pointers: the
outputs' allocations (same shapes, strides and dtypes) and one driver call per launch.

A recorded launch is replayable only when each of its tensor arguments is one of the call's
named tensors at offset 0 (inputs, or outputs: whole new tensors), a cached workspace of
:func:`fastpath._core.launch.workspace` (kept alive forever) or an empty tensor with a null
pointer (nothing to read or write: dropout's mask when none is kept), and every other argument a
plain value (numbers, constexprs), or a tensor descriptor on one of the call's tensors (a replay
makes it again on the new one). Anything else (a temporary copy, a view at an offset, a
descriptor on anything else, a call that launched nothing, a launch through Triton's own path)
leaves the call unrecorded, and it keeps taking the normal path. The op's path must do no device work
besides its Triton launches and its outputs' allocations: a fill, a copy or any other torch
op would not be replayed (``fastpath.linear``'s matrix-vector path; its cuBLAS path
launches nothing through Triton and is never recorded). An output that no recorded launch
takes (made by a torch op) leaves the call unrecorded too. Users: linear, linear_swiglu, scaled_mm, softmax,
rms_norm, fused_experts, scaled_dot_product_attention, the small-matrix inv / solve and pinv,
frexp, heaviside, the unsigned comparisons, sample, pad, and the eager autograd paths of mse_loss,
dropout and batch_norm (and mse_loss without autograd).

Off in Triton's interpreter, while compiling, with launch hooks set (profilers), with
``FASTPATH_FAST_LAUNCH=0`` or ``FASTPATH_LAUNCH_MEMO=0``, for calls autograd must record, and
for arguments that are not plain tensors (their errors come from the op's own checks).
"""
from __future__ import annotations

import os
import weakref
from typing import Callable, Optional, Sequence

import torch

from . import launch as L

#: ``FASTPATH_LAUNCH_MEMO=0`` turns every memo off (tests turn it off outside their own
#: checks of it: they change module knobs between calls, which a replay would not see).
ENABLED = os.environ.get("FASTPATH_LAUNCH_MEMO", "1") == "1"


class _Replay:
    """The launches (templates), each output's (shape, strides, dtype) or None,
    and whether the op returned one tensor (else a tuple)."""
    __slots__ = ("launches", "outs", "single")

    def __init__(self, launches, outs, single):
        self.launches, self.outs, self.single = launches, outs, single


#: The tensor types a memo takes (a subclass, or anything else, takes the op's path).
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _whole(t: torch.Tensor) -> bool:
    """``t`` is a whole new allocation in some dense order (contiguous, channels-last...): no
    offset, no gaps, no overlap, nothing else in its storage."""
    return (t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()
            and sum((d - 1) * st for d, st in zip(t.shape, t.stride()) if d) + 1 == max(t.numel(), 1))


class _Desc:
    """A recorded tensor descriptor whose base is the call's tensor ``index``: a replay makes
    the same descriptor (shape, strides, block, padding: the call's properties fix them) on
    the new tensor, without the constructor's checks, which the recorded one passed."""
    __slots__ = ("index", "desc")

    def __init__(self, index: int, desc):
        self.index, self.desc = index, desc

    def make(self, tensors, outs):
        new = object.__new__(type(self.desc))
        new.__dict__.update(self.desc.__dict__)
        i = self.index
        new.base = tensors[i] if i < len(tensors) else outs[i - len(tensors)]
        return new


def replay(entry: _Replay, tensors, ptrs: list, dev: torch.device):
    """New outputs on ``dev``, and the recorded launches with ``tensors``' and their pointers
    (``ptrs``, 0 for None, as the key read them): each launch's recorded argument list (grid,
    stream, kernel and every argument as ``run`` takes them) copied, the call's pointers and
    descriptors put at their places."""
    # (empty_strided for every output: its argument parsing is cheaper than empty's, 0.9 against 1.4 us)
    outs = [None if o is None else torch.empty_strided(o[0], o[1], dtype=o[2], device=dev) for o in entry.outs]
    ptrs = ptrs + [o.data_ptr() if o is not None else 0 for o in outs]
    for run, full, patches, descs in entry.launches:
        args = full.copy()
        for pos, i in patches:
            args[pos] = ptrs[i]
        for pos, d in descs:
            args[pos] = d.make(tensors, outs)
        run(*args)
    return outs[0] if entry.single else tuple(outs)


#: Every memo (``clear_all``).
_MEMOS: "weakref.WeakSet[LaunchMemo]" = weakref.WeakSet()


def clear_all() -> None:
    """Forget every memo's recorded calls: after a module knob or plan table changes, the next
    calls take their op's path again (a replay would keep the launches recorded before the change;
    ``fastpath.bench.harness.knobs`` calls this on entering and leaving)."""
    for m in list(_MEMOS):
        m.entries.clear()


class LaunchMemo:
    """``memo.call(fn, tensors, extra)``: ``fn()`` (the op's normal path, which returns one new
    tensor or a tuple of new tensors and Nones), or a replay of its launches when ``tensors``
    (the call's tensor arguments, None allowed) have the properties of a recorded call and
    ``extra`` (its other arguments, hashable) is equal. ``maxsize`` keys at most; beyond, the
    memo starts over."""

    def __init__(self, maxsize: int = 256):
        self.entries: dict = {}
        self.maxsize = maxsize
        self.device_types = ("cuda",)  # where Launcher's cached relaunch runs (tests add "cpu")
        _MEMOS.add(self)

    def call(self, fn: Callable[[], torch.Tensor], tensors: Sequence[Optional[torch.Tensor]],
             extra: tuple = ()):
        if not ENABLED or not L.FAST_LAUNCH or L.INTERPRET:
            return fn()
        grad = torch.is_grad_enabled()
        parts, ptrs = [], []
        for t in tensors:  # plain tensors (not a subclass, not a wrong type: fn's checks name it)
            if t is None:
                parts.append(None)
                ptrs.append(0)
            elif type(t) not in _PLAIN or grad and t.requires_grad:
                return fn()
            else:
                p = t.data_ptr()
                ptrs.append(p)
                parts.append((t.shape, t.stride(), t.dtype, t.device, not p & 15))
        if parts[0] is None:
            return fn()
        device = parts[0][3]
        if (device.type not in self.device_types or L.RECORDING.records is not None
                or torch.compiler.is_compiling() or L._hooks_set()):
            return fn()  # (while another call records, its record takes these launches)
        dev = device.index
        key = (dev, L._raw_stream(dev), extra, *parts)
        try:
            entry = self.entries.get(key)
        except TypeError:  # an unhashable argument: the op's path (and its checks) decide
            return fn()
        if entry is not None:
            if dev is not None and dev != torch.cuda.current_device():  # tensors on another GPU: its context
                with torch.cuda.device(dev):
                    return replay(entry, tensors, ptrs, device)
            return replay(entry, tensors, ptrs, device)
        if ("skip", key) in self.entries:
            return fn()
        records: list = []
        L.RECORDING.records = records  # (per thread: another thread's launches are not this call's)
        try:
            out = fn()
        finally:
            L.RECORDING.records = None
        entry = self.template(records, tensors, out, key[1])
        if len(self.entries) >= self.maxsize:
            self.entries.clear()
        self.entries[key if entry is not None else ("skip", key)] = entry
        return out

    @staticmethod
    def template(records, tensors, out, stream: int) -> Optional[_Replay]:
        """The launches as templates: ``run``'s whole argument list as recorded (the stream is
        part of the memo's key), with the places of the call's pointers (tensor i, or output j
        at len(tensors) + j) and of its descriptors. None when a launch is not replayable."""
        single = isinstance(out, torch.Tensor)
        outs = (out,) if single else tuple(out) if isinstance(out, tuple) else None
        if (not records or None in records or not outs
                or not all(o is None or isinstance(o, torch.Tensor) and _whole(o) for o in outs)):
            return None  # nothing launched, a launch not replayable, or not whole new tensors
        named = [t.data_ptr() if t is not None else None for t in tensors]
        named += [o.data_ptr() if o is not None and o.numel() else None for o in outs]
        real = [p for p in named if p is not None]
        if len(set(real)) != len(real):  # aliasing inputs: leave it to the normal path
            return None
        index = {p: i for i, p in enumerate(named) if p is not None}
        spaces = {b.data_ptr() for b in L._workspaces.values()}
        launches, used = [], set()
        for run, function, packed, grid, args in records:
            full = [grid[0], grid[1], grid[2], stream, function, packed, None, None, None]
            patches, descs = [], []
            for a in args:
                if isinstance(a, torch.Tensor):
                    p = a.data_ptr()
                    if p in index:
                        patches.append((len(full), index[p]))
                        used.add(index[p])
                    elif p not in spaces and not (p == 0 and a.numel() == 0):
                        return None
                    full.append(p)  # a workspace's (or an empty tensor's null) pointer stays; a call's is replaced
                elif hasattr(a, "block_shape") and hasattr(a, "base") and hasattr(a, "__dict__"):
                    p = a.base.data_ptr()  # a tensor descriptor: on one of the call's tensors, rebuilt
                    if p not in index or a.base.dtype != [*tensors, *outs][index[p]].dtype:
                        return None
                    descs.append((len(full), _Desc(index[p], a)))
                    used.add(index[p])
                    full.append(None)
                elif hasattr(a, "base") or hasattr(a, "data_ptr"):  # anything else that holds memory
                    return None
                else:  # numbers, and constexprs (dtypes...) as the compiled kernel took them
                    full.append(a)
            launches.append((run, full, tuple(patches), tuple(descs)))
        if any(o is not None and o.numel() and len(tensors) + j not in used for j, o in enumerate(outs)):
            return None  # an output no launch writes (a torch op made it): a replay would not
        specs = tuple(None if o is None else (tuple(o.shape), o.stride(), o.dtype) for o in outs)
        return _Replay(tuple(launches), specs, single)
