#!/usr/bin/env bash
# One device call: engine tests compiled, the embedded model trained, decode benchmarks.
# Usage (repo root, on the GPU machine): OUT=/some/dir bash scripts/gpu_decode.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 170 python3 -m pytest -q -p no:cacheprovider --tb=short tests/models tests/ops/test_elementwise.py \
  tests/ops/test_linalg_small.py tests/ops/test_gated_delta.py tests/ops/test_norm.py 2>&1 | tee "$OUT/pytest.log" | tail -40
timeout 110 python3 scripts/train_default.py --out "$OUT/default" --steps 1500 2>&1 | tee "$OUT/train.log" | tail -6
PYTHONPATH=$PWD/src timeout 20 python3 -m fastpath generate --model "$OUT/default" --prompt "The for statement is used to" --max-new-tokens 60 2>&1 | tail -4
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl"
timeout 170 $B --config qwen3-30b-a3b --random-weights --hf 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | tail -5
timeout 70 $B --config qwen3-30b-a3b --random-weights --fp8 2>&1 | tee -a "$OUT/decode.log" | tail -3
timeout 80 $B --config qwen3-8b --random-weights --hf 2>&1 | tee -a "$OUT/decode.log" | tail -3
