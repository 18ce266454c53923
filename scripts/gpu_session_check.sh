#!/usr/bin/env bash
# One device call after this session's CPU-side changes: the touched tests compiled on the
# GPU (in parallel), decode with programmatic dependent launch on and off (FASTPATH_PDL),
# then the float16 route of FP8 matrix-vector products (scripts/linear_probe.py --fp8-only).
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
for f in tests/ops/test_linear.py tests/ops/test_sampling.py tests/models; do
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider --tb=short "$f" >"$OUT/$(basename "$f" .py).log" 2>&1 &
done
wait
for f in "$OUT"/*.log; do printf '%-22s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f")"; done
grep -h -A12 "^___" "$OUT"/*.log | head -40
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
run() { local t=$1; shift; timeout "$t" $B "$@" 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | grep -v "^\r\?loading" | tail -1; }
echo "== qwen3-8b PDL on"; run 60 --config qwen3-8b
echo "== qwen3-8b PDL off"; FASTPATH_PDL=0 run 60 --config qwen3-8b
timeout 240 python3 scripts/linear_probe.py --fp8-only --json "$OUT/linear_probe_fp8.jsonl" 2>&1 | grep -v Warn | tee "$OUT/probe.log" | grep -v "^      next"
