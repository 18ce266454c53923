#!/usr/bin/env bash
# The device measurements the twentieth session's last changes wait for (its device time was
# spent): the compiled tests of what changed (linalg inv / solve / pinv and
# scaled_dot_product_attention through the launch memo, tensor descriptors rebuilt at replay,
# the memo's refusal of outputs no launch writes), then the eager linalg and decode-attention
# rows with the memo on and off, alternated.
# Usage (repo root, GPU machine): OUT=/some/dir FASTPATH_COMMIT=<local short hash> bash
# scripts/gpu_pending.sh (about 9 minutes; give the call its 600 s). The device's checkout may not carry your last
# commits: pass the hash you ran, or the records name an older one.
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=line tests/ops/test_memo.py \
  tests/ops/test_linalg_small.py tests/ops/test_linalg_svd.py tests/test_core.py tests/ops/test_attention.py \
  tests/engine 2>&1 | grep -i "fail\|error\|passed"
for r in 1 2; do
  for memo in 1 0; do
    FASTPATH_LAUNCH_MEMO=$memo timeout 60 python3 -m fastpath.bench linalg --only inv --json "$OUT/linalg_memo$memo.jsonl" \
      2>&1 | grep "eager" | sed "s/^/memo=$memo /"
    FASTPATH_LAUNCH_MEMO=$memo timeout 60 python3 -m fastpath.bench linalg --only pinv --json "$OUT/linalg_memo$memo.jsonl" \
      2>&1 | grep "eager" | sed "s/^/memo=$memo /"
    FASTPATH_LAUNCH_MEMO=$memo timeout 90 python3 -m fastpath.bench attention --only decode --json \
      "$OUT/attention_memo$memo.jsonl" 2>&1 | grep "eager" | sed "s/^/memo=$memo /"
  done
done
# the decode engine calls scaled_dot_product_attention (prefill eagerly, decode captured): a
# model end to end with the memo in its path
timeout 90 python3 -m fastpath bench-decode --config qwen3-8b --random-weights --json "$OUT/decode.jsonl" 2>&1 | tail -2
# batch_norm's rows plan, 2-D at 1.20x (target 1.3x): larger tiles with more warps, narrower channel blocks
K=ops.batch_norm_kernel
for cfg in "" "--set $K.ROWS_TILE=16384 --set $K.ROWS_WARPS=16" "--set $K.ROWS_MAX_BC=512" \
           "--set $K.ROWS_TILE=16384 --set $K.ROWS_MAX_BC=512 --set $K.ROWS_WARPS=16"; do
  echo "== batch_norm $cfg"
  timeout 60 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs --json "$OUT/bn_rows.jsonl" $cfg \
    2>&1 | grep "graph" | grep -v 256x64
done
# the LU panel's rows through memory (lu.PANEL_MEM, off until timed): compiled LU tests, then the bench's lu rows
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=line tests/ops/test_linalg_lu.py 2>&1 | tail -2
for cfg in "" "--set ops.linalg.lu.PANEL_MEM=True" "" "--set ops.linalg.lu.PANEL_MEM=True"; do
  echo "== lu $cfg"
  timeout 90 python3 -m fastpath.bench linalg --only lu_ --json "$OUT/lu_mem.jsonl" $cfg 2>&1 | grep "eager" | grep lu_
done
