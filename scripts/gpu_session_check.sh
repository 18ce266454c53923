#!/usr/bin/env bash
# One device call after this session's CPU-side changes: the touched tests compiled on the
# GPU (in parallel), then the engine's side-stream read-back measured against inline copies.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for f in tests/ops/test_softmax.py tests/ops/test_attention.py tests/engine/test_engine.py tests/ops/test_dropout.py; do
  timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short "$f" >"$OUT/$(basename "$f" .py).log" 2>&1 &
done
wait
for f in "$OUT"/*.log; do printf '%-22s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f")"; done
grep -h -A10 "^___" "$OUT"/*.log | head -40
timeout 300 python3 scripts/side_stream_gain.py --json "$OUT/side_stream.json" 2>&1 | grep -v Warning
