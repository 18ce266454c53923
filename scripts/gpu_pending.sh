#!/usr/bin/env bash
# A session's first device calls (waiting since the twenty-fourth session: mode 1's records of the
# hybrids with each layer's first norm fused, LFM2.5 and Qwen3.6 FP8 above all):
#   1: the compiled decode-path tests (fused norms, linear, MoE, models, engine), then decode end
#      to end for every named model the README's table lists (records for docs/perf.md).
#   2: where a layer's norm runs, A/B in one process (scripts/norm_fusion_ab.py).
#   3: the fused norm with its rstd deferred (linear.NORM_DEFER) against the row read first.
# Usage (repo root, GPU machine): OUT=/some/dir FASTPATH_COMMIT=<local short hash> bash
# scripts/gpu_pending.sh 1|2|3. The device's checkout may not carry your last commits: pass the
# hash you ran, or the records name an older one.
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
case "${1:-1}" in
1)
  timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_linear.py tests/ops/test_moe.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "qwen3-8b" "qwen3.6-35b-a3b" "qwen3.6-35b-a3b --fp8" \
      "lfm2.5-8b-a1b" "lfm2.5-8b-a1b --fp8"; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
2)
  timeout 500 python3 scripts/norm_fusion_ab.py --json "$OUT/norm_ab.json" 2>&1 | grep -v Warn ;;
3)  # the fused norm with its rstd deferred (any size, the tuned plans) against the row read first
  FASTPATH_LAUNCH_MEMO=0 timeout 560 python3 scripts/knob_ab.py \
    --configs qwen3.6-35b-a3b,qwen3-30b-a3b,qwen3-8b,lfm2.5-8b-a1b \
    --variant "deferred:linear.NORM_DEFER=True" --variant "row first, 16M:linear.NORM_DEFER=False" \
    --json "$OUT/norm_defer_ab.json" 2>&1 | grep "tok/s" ;;
esac
