#!/usr/bin/env bash
# One device call at the end of a session: the linear, fp8 and moe suites, then the decode
# table (every named config; transformers beside two of them).
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_session_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python3 -m fastpath.bench linear fp8 moe --json "$OUT/bench.jsonl" 2>&1 | grep -c " ok"
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
run() { local t=$1; shift; timeout "$t" $B "$@" 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | grep -v "^\r\?loading" | grep -v "^recorded" | grep -v "^building" | cut -c1-120; }
run 60 --config qwen3-8b --hf
run 40 --config llama-3-8b
run 40 --config llama-3-8b --fp8
run 90 --config qwen3-30b-a3b --hf
run 40 --config qwen3-30b-a3b --fp8
run 45 --config qwen3.6-35b-a3b
run 45 --config qwen3.6-35b-a3b --fp8
run 35 --config lfm2.5-8b-a1b
