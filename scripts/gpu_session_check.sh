#!/usr/bin/env bash
# A first device call for a session: the compiled tests of the decode path's kernels, where a
# decode step's time goes (three models) and the router kernel by its two top-k methods.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
# (about 6 minutes; PART=1 or 2 runs half.) The compiled linalg tests take longer than a call
# leaves beside this (most of it compiling): run `python3 -m pytest -n 8 tests/ops/test_linalg_svd.py
# tests/ops/test_linalg_small.py` in a call of its own (95 tests in 54 s at f6da8cd).
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
if [ "${PART:-1}" = 1 ]; then
timeout 240 python3 -m pytest -q -p no:cacheprovider -rf --tb=line tests/ops/test_moe.py tests/ops/test_attention.py \
  tests/ops/test_batch_norm.py -k "route or router or split or slices or decode or plans" 2>&1 | grep -i "fail\|error\|passed"
# the tensor-descriptor (TMA) paths: scaled_mm's tiles, prefill and decode attention
timeout 150 python3 -m pytest -q -p no:cacheprovider -rf --tb=line tests/ops/test_fp8.py tests/ops/test_attention.py \
  tests/ops/test_attention_prefill.py -k "tensor_descriptors or load_paths or softmax_variants or kv_len" 2>&1 \
  | grep -i "fail\|error\|passed"
fi
if [ "${PART:-2}" = 2 ]; then
for cfg in qwen3-8b qwen3-30b-a3b qwen3.6-35b-a3b; do
  timeout 60 python3 scripts/decode_profile.py --config $cfg --json "$OUT/decode_profile.jsonl" 2>&1 | grep -v "^\s*$" \
    | grep -v "loading\|Warn\|USDT\|warn_once" | tee -a "$OUT/decode_profile.log" | head -16
done
timeout 60 python3 scripts/moe_profile.py --router --json "$OUT/router.json" 2>&1 | grep router
fi
