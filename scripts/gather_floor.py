"""GPU probe: the floor of ``take``'s benchmark row (16M float32 gathered at random from 64M, issue
10's "85% of the copy bandwidth"). A random 4-byte read costs the DRAM a whole 32-byte sector, so
a gather's speed is set by its access pattern, not by the bytes the bench counts (index 8 + value
4 + output 4 a gathered element). Timed here, each cold L2, CUDA-graph replays:

* ``hash``: ``out[i] = src[h(i) % n]``, the indices computed in registers (no index read): the
  random reads and the output writes alone, the floor of any random gather of this size;
* ``take`` (``fastpath.ops.elementwise.take(validate=False)``) and ``torch.take`` on the bench's
  random indices, on the same indices sorted (the same set of reads in address order), and on
  indices ``i`` (a contiguous copy: what 85% of the copy bandwidth looks like).

    PYTHONPATH=src python3 scripts/gather_floor.py
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@triton.jit
def _hash_gather(src_ptr, out_ptr, n_out, mask_src, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = i.to(tl.uint32) * 2654435761  # Knuth's multiplicative hash: a permutation of the uint32s
    h = h ^ (h >> 15)
    j = (h & mask_src).to(tl.int64)
    tl.store(out_ptr + i, tl.load(src_ptr + j, mask=i < n_out), mask=i < n_out)


def main() -> int:
    from tune_batch_norm import copy_bandwidth, graph_us

    from fastpath.bench.elementwise import _take_inputs
    from fastpath.ops.elementwise import take
    from fastpath.streams import _flush_buffer
    dev = torch.device("cuda")
    buf = _flush_buffer(dev)
    flush = lambda: buf.sum()  # noqa: E731
    n_src, n_idx = 1 << 26, 1 << 24
    x, idx = _take_inputs((n_src, n_idx), "float32", dev, 0)
    wrapped = torch.where(idx < 0, idx + n_src, idx)
    ordered = wrapped.sort().values
    ident = torch.arange(n_idx, device=dev)
    out = torch.empty(n_idx, device=dev)
    copy = copy_bandwidth(dev)
    counted = n_idx * 16  # the bench's bytes: index 8 + value 4 + output 4
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}; copy "
          f"{copy:.0f} GB/s; bytes counted {counted / 1e6:.1f} MB (85% of copy: "
          f"{counted / (0.85 * copy * 1e3):.1f} us)", flush=True)

    def hashed():
        _hash_gather[(triton.cdiv(n_idx, 1024),)](x, out, n_idx, n_src - 1, BLOCK=1024)
    hashed()
    h_us = graph_us(hashed, flush, 20)
    print(f"{'hash gather (no index read)':<36} {h_us:8.2f} us; random 32-byte sectors "
          f"{n_idx * 32 / (h_us * 1e3):6.0f} GB/s", flush=True)
    for label, ix in (("random", idx), ("random, sorted", ordered), ("contiguous", ident)):
        if not torch.equal(take(x, ix, validate=False), torch.take(x, ix)):
            print(f"take {label}: MISMATCH against torch.take", flush=True)
        ours = graph_us(lambda: take(x, ix, validate=False), flush, 20)
        theirs = graph_us(lambda: torch.take(x, ix), flush, 20)
        print(f"take {label:<31} {ours:8.2f} us ({100 * counted / (ours * 1e3) / copy:5.1f}% of copy); "
              f"torch.take {theirs:8.2f} us ({theirs / ours:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
