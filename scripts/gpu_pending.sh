#!/usr/bin/env bash
# The device measurements the twenty-second session's last changes wait for (its device time
# was spent), in two calls of under 10 minutes each:
#   1: the compiled MoE tests (the transposed fp8 gate/up dots, GATE_UP_SWAP, off by default and
#      never run on a GPU yet), then scripts/moe_fp8_tokens.py: fp8 experts at 16 / 32 / 64
#      tokens by x prescaling, then GATE_UP_SWAP x warps x I columns a program (launch memo off).
#   2: decode end to end (Qwen3-30B-A3B bf16 and fp8, Qwen3.6, Qwen3-8B; the engine's prefill
#      tok/s also takes the heads-first prefill attention order), then the attention suite.
# Usage (repo root, GPU machine): OUT=/some/dir FASTPATH_COMMIT=<local short hash> bash
# scripts/gpu_pending.sh 1|2. The device's checkout may not carry your last commits: pass the
# hash you ran, or the records name an older one.
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
case "${1:-1}" in
1)
  timeout 150 python3 -m pytest -v -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_moe.py > "$OUT/tests.log" 2>&1
  grep -E "FAILED|ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  FASTPATH_LAUNCH_MEMO=0 timeout 300 python3 scripts/moe_fp8_tokens.py --json "$OUT/moe_fp8_tokens.json" 2>&1 \
    | grep -v Warn ;;
2)
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "qwen3.6-35b-a3b" "qwen3-8b"; do
    timeout 90 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 | tail -1
  done
  timeout 200 python3 -m fastpath.bench attention --graphs --json "$OUT/bench.jsonl" 2>&1 | grep "eager\|graph" | cut -c1-150 ;;
esac
