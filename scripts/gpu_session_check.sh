#!/usr/bin/env bash
# One device call after CPU-side changes to MoE routing and small inverses: their tests
# compiled (in parallel), the inverse bench rows, then decode of the MoE models.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for f in tests/ops/test_moe.py tests/ops/test_linalg_small.py tests/models/test_hybrid.py tests/models/test_models.py; do
  timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short "$f" >"$OUT/$(basename "$f" .py).log" 2>&1 &
done
wait
for f in "$OUT"/*.log; do printf '%-22s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f")"; done
grep -h -A10 "^___" "$OUT"/*.log | head -40
timeout 60 python3 -m fastpath.bench linalg --only "inv " --json "$OUT/bench.jsonl" 2>&1 | grep "^linalg" | cut -c1-200
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
for c in "qwen3-30b-a3b" "qwen3.6-35b-a3b" "lfm2.5-8b-a1b" "qwen3-30b-a3b --fp8"; do
  timeout 45 $B --config $c 2>&1 | grep "^fastpath"
done
