#!/usr/bin/env bash
# One device call after this session's CPU-side changes: the touched tests compiled on the
# GPU (in parallel), then decode with programmatic dependent launch on and off (FASTPATH_PDL).
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for f in tests/ops/test_linear.py tests/ops/test_norm.py tests/ops/test_rope.py tests/ops/test_attention.py \
         tests/ops/test_moe.py tests/ops/test_sampling.py tests/ops/test_gated_delta.py tests/models tests/engine; do
  timeout 240 python3 -m pytest -q -x -p no:cacheprovider --tb=short "$f" >"$OUT/$(basename "$f" .py).log" 2>&1 &
done
wait
for f in "$OUT"/*.log; do printf '%-22s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f")"; done
grep -h -A12 "^___" "$OUT"/*.log | head -60
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
run() { local t=$1; shift; timeout "$t" $B "$@" 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | grep -v "^\r\?loading" | tail -2; }
for cfg in qwen3-8b qwen3-30b-a3b; do
  echo "== $cfg PDL on"; run 80 --config "$cfg"
  echo "== $cfg PDL off"; FASTPATH_PDL=0 run 80 --config "$cfg"
done
