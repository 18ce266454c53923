#!/usr/bin/env bash
# The first device call planned for the next session (written at the end of this one):
# where a decode step's time goes, then the knobs prepared but not measured (decode
# attention's EARLY_V, narrower bf16 MoE slices) and the batch_norm 2-D sweep with its graph
# timings, then the bf16 matrix-vector plans re-swept with programmatic dependent launch on;
# moe_profile --slices also times SLICE_H_SPLIT 1-4 (MoE one-token slices sharing gate/up).
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
# (up to ~11 minutes in all: run it as two calls, e.g. "PART=1 ..." then "PART=2 ...")
if [ "${PART:-1}" = 1 ]; then
timeout 150 python3 -m pytest -q -x -p no:cacheprovider --tb=short tests/ops/test_moe.py tests/ops/test_attention.py \
  -k "hsplit or split_forced" 2>&1 | tail -3
for cfg in qwen3-8b qwen3-30b-a3b qwen3.6-35b-a3b; do
  timeout 60 python3 scripts/decode_profile.py --config $cfg --json "$OUT/decode_profile.jsonl" 2>&1 | grep -v "^\s*$" \
    | grep -v "loading\|Warn\|USDT" | tee -a "$OUT/decode_profile.log" | head -16
done
timeout 60 python3 scripts/tune_attention.py --json "$OUT/tune_attention.jsonl" \
  --variants '[{}, {"EARLY_V": true}]' 2>&1 | grep -v Warn | cut -c1-160
fi
if [ "${PART:-2}" = 2 ]; then
timeout 100 python3 scripts/tune_batch_norm.py --only 2d_fp32 2>&1 | grep -v Warn | tail -10 | tee "$OUT/tune_bn.log"
timeout 150 python3 scripts/moe_profile.py --slices --json "$OUT/moe_slices.json" 2>&1 | grep -v Warn | tail -20
timeout 150 python3 scripts/linear_probe.py --quick --json "$OUT/linear_probe.jsonl" 2>&1 | grep -v "Warn\|^      next"
fi
