#!/usr/bin/env bash
# A first device call for a session: the compiled tests of the decode path's kernels and of the
# linalg kernels changed last (svd's convergence check, the round-robin sweep), where a decode
# step's time goes (three models), the router kernel by rank and by arg-max, and the svd/pinv
# plans with and without the round-robin sweep.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
# (about 7 minutes; PART=1, 2 or 3 runs a third.)
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if [ "${PART:-1}" = 1 ]; then
timeout 240 python3 -m pytest -q -p no:cacheprovider -rf --tb=line tests/ops/test_moe.py tests/ops/test_attention.py \
  tests/ops/test_batch_norm.py -k "route or router or split or slices or decode or plans" 2>&1 | grep -i "fail\|error\|passed"
timeout 240 python3 -m pytest -q -p no:cacheprovider -rf --tb=line tests/ops/test_linalg_svd.py \
  tests/ops/test_linalg_small.py 2>&1 | grep -i "fail\|error\|passed"
fi
if [ "${PART:-2}" = 2 ]; then
for cfg in qwen3-8b qwen3-30b-a3b qwen3.6-35b-a3b; do
  timeout 60 python3 scripts/decode_profile.py --config $cfg --json "$OUT/decode_profile.jsonl" 2>&1 | grep -v "^\s*$" \
    | grep -v "loading\|Warn\|USDT\|warn_once" | tee -a "$OUT/decode_profile.log" | head -16
done
timeout 60 python3 scripts/moe_profile.py --router --json "$OUT/router.json" 2>&1 | grep router
fi
if [ "${PART:-3}" = 3 ]; then
timeout 200 python3 scripts/tune_linalg.py --only 8x8 --seconds 40 2>&1 | tee "$OUT/tune_linalg_8x8.log" | grep -v "Warn\|skipped"
fi
