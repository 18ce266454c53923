#!/usr/bin/env bash
# One device call after this session's CPU-side changes: the touched tests compiled on the
# GPU, then the decode table (every named config; transformers beside two of them).
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 120 python3 -m pytest -q -x -p no:cacheprovider --tb=short tests/ops/test_linear.py tests/ops/test_sampling.py \
  -k "test_linear.py or pruned or ties" 2>&1 | tail -15
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
run() { local t=$1; shift; timeout "$t" $B "$@" 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | grep -v "^\r\?loading" | grep -v "^recorded" | tail -3; }
run 60 --config qwen3-8b --hf
run 40 --config llama-3-8b
run 40 --config llama-3-8b --fp8
run 90 --config qwen3-30b-a3b --hf
run 40 --config qwen3-30b-a3b --fp8
run 45 --config qwen3.6-35b-a3b
run 45 --config qwen3.6-35b-a3b --fp8
run 35 --config lfm2.5-8b-a1b
