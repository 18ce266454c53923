#!/usr/bin/env bash
# The device measurements the nineteenth session's changes wait for (no GPU was lent then):
# compiled tests of what changed, the A/B of the two plans that stay off until measured
# (batch_norm's grid-wide rows plan: ROWS_2D / ROWS_CL; mse_loss's L2 hints: EVICT), the
# training and complex-inverse bench rows, the eager training ops' host time with and
# without the launch memo, and logspace's kernel against its host path.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_pending.sh (about 8 minutes;
# PART=1 or 2 runs half). Then set the defaults from the numbers and record.
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if [ "${PART:-1}" = 1 ]; then
timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=line tests/ops/test_batch_norm.py \
  tests/ops/test_loss.py tests/ops/test_memo.py tests/ops/test_linalg_small.py tests/ops/test_elementwise.py 2>&1 | grep -i "fail\|error\|passed"
timeout 150 python3 scripts/tune_batch_norm.py --only 2d_fp32 nhwc_bf16 --budget 120 2>&1 | tail -16
fi
if [ "${PART:-2}" = 2 ]; then
for v in 0 1 2; do  # mse_loss 'none' forward + backward in graphs, per L2-hint setting
  timeout 60 python3 -c "
import sys, fastpath.ops.loss as L
from fastpath.bench.__main__ import main
L.EVICT = $v
print('EVICT=$v', flush=True)
main(['training', '--only', 'mse_loss none', '--graphs', '--json', '$OUT/mse_evict$v.jsonl'])" 2>&1 | grep "EVICT\|mse_loss"
done
timeout 120 python3 -m fastpath.bench training --only batch_norm --graphs --json "$OUT/bench_bn.jsonl" 2>&1 | grep batch_norm
timeout 120 python3 -m fastpath.bench linalg --only inv --graphs --json "$OUT/bench_linalg.jsonl" 2>&1 | grep inv
timeout 60 python3 scripts/host_profile.py 2>&1 | grep fwd+bwd
FASTPATH_LAUNCH_MEMO=0 timeout 60 python3 scripts/host_profile.py 2>&1 | grep fwd+bwd | sed 's/^/(no memo) /'
# logspace's kernel against the host path's time (a million float32 steps; the host path: the
# Python loop of reference_logspace, ~0.3 us a step)
timeout 60 python3 -c "
import time, torch, fastpath.ops.elementwise as ew
for steps in (1000, 1_000_000):
    for path, knob in (('kernel', 0), ('host', 10**9)):
        ew.LOGSPACE_KERNEL_STEPS = knob
        ew.logspace(0, 5, steps, device='cuda'); torch.cuda.synchronize()
        t0 = time.perf_counter(); ew.logspace(0, 5, steps, device='cuda'); torch.cuda.synchronize()
        print(f'logspace {steps} float32 {path}: {1e6 * (time.perf_counter() - t0):.0f} us')
t0 = time.perf_counter(); torch.logspace(0, 5, 1_000_000, device='cuda'); torch.cuda.synchronize()
print(f'torch.logspace 1000000 cuda: {1e6 * (time.perf_counter() - t0):.0f} us')"
fi
