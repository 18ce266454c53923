#!/usr/bin/env bash
# The device measurements the twenty-first session's changes wait for (it had no device time
# left for them), in three calls of under 10 minutes each:
#   1: the compiled tests of what changed (the launch memo's argument lists, which every memo
#      user replays through; bincount / take refusing validate=True inside a graph capture;
#      the gated delta rule's one-token conv step with its loads issued first),
#      then the eager and graph rows of linear, fp8 and attention (their eager rows predate
#      the memo or its faster replay).
#   2: the suites whose rows predate the memo: moe, sampling, softmax, training, elementwise, pad.
#   3: the conv suite (its causal_conv3d rows are from the first session's code), and decode
#      (Qwen3.6 for the gated delta step: predicted 385 -> ~388 tok/s).
# Usage (repo root, GPU machine): OUT=/some/dir FASTPATH_COMMIT=<local short hash> bash
# scripts/gpu_pending.sh 1|2|3. The device's checkout may not carry your last commits: pass the
# hash you ran, or the records name an older one.
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
bench() {  # suite [args...]: the suite's rows into $OUT/bench.jsonl, a short log line each
  local suite=$1; shift
  timeout "${BENCH_TIMEOUT:-150}" python3 -m fastpath.bench "$suite" --graphs --json "$OUT/bench.jsonl" "$@" 2>&1 \
    | tee -a "$OUT/bench.log" | grep "eager\|graph" | cut -c1-150
}
case "${1:-1}" in
1)
  timeout 260 python3 -m pytest -v -n 14 -p no:cacheprovider -rf --tb=short tests/ops/test_memo.py tests/test_core.py \
    tests/ops/test_linear.py tests/ops/test_bincount.py tests/ops/test_elementwise.py tests/ops/test_loss.py \
    tests/ops/test_dropout.py tests/ops/test_gated_delta.py tests/ops/test_gated_delta_conv.py > "$OUT/tests.log" 2>&1
  grep -E "FAILED|ERROR" "$OUT/tests.log" | head -20; grep -c PASSED "$OUT/tests.log"; tail -1 "$OUT/tests.log"
  bench linear; bench fp8; bench attention ;;
2)
  bench moe; bench sampling; bench softmax; bench training; bench elementwise; bench pad ;;
3)
  BENCH_TIMEOUT=300 bench conv
  for cfg in qwen3.6-35b-a3b qwen3-8b qwen3-30b-a3b; do
    timeout 90 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 | tail -1
  done ;;
esac
