#!/usr/bin/env bash
# One device call at the end of a session: the decode attention tests compiled, the attention
# suite, decode of two models, batch_norm's 2-D sweep and two decode-attention variants.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python3 -m pytest -q -x -p no:cacheprovider --tb=short tests/ops/test_attention.py \
  -k "split or kv or window or gqa or masked" 2>&1 | tail -3
timeout 120 python3 -m fastpath.bench attention --json "$OUT/bench.jsonl" 2>&1 | grep " graph \|prefill" | cut -c1-150
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
for cfg in qwen3-30b-a3b qwen3-8b; do timeout 40 $B --config $cfg 2>&1 | grep "^fastpath" | cut -c1-120; done
timeout 100 python3 scripts/tune_batch_norm.py --only 2d_fp32 2>&1 | grep -v Warn | tail -12 | tee "$OUT/tune_bn.log"
timeout 60 python3 scripts/tune_attention.py --json "$OUT/tune_attention.jsonl" \
  --variants '[{}, {"MIN_KV_PER_SPLIT": 64}]' 2>&1 | grep -v Warn | cut -c1-200
