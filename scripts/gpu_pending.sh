#!/usr/bin/env bash
# A session's first device calls (nothing measured is waiting since the twenty-third session):
#   1: the compiled decode-path tests (fused norms, linear, MoE, models, engine), then decode end
#      to end for every named model the README's table lists (records for docs/perf.md).
#   2: where a layer's norm runs, A/B in one process (scripts/norm_fusion_ab.py).
#   3: hybrid layers' first norm inside the mixer's projection: compiled model tests, A/B.
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
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "qwen3-8b" "qwen3.6-35b-a3b" "lfm2.5-8b-a1b"; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
2)
  timeout 500 python3 scripts/norm_fusion_ab.py --json "$OUT/norm_ab.json" 2>&1 | grep -v Warn ;;
3)  # each hybrid layer's first norm inside its mixer's input projection (hybrid.FUSE_NORM), then records
  H=fastpath.models.hybrid.FUSE_NORM
  timeout 200 python3 scripts/knob_ab.py --configs qwen3.6-35b-a3b --variant "in projection <=16M:$H=True" \
    --variant "own kernel:$H=False" --variant "in projection <=32M:$H=True;linear.NORM_FUSE_MAX_ELEMS=33554432" \
    --json "$OUT/mixer_norm_ab.json" 2>&1 | grep "tok/s"
  timeout 100 python3 scripts/knob_ab.py --configs lfm2.5-8b-a1b --variant "in projection:$H=True" \
    --variant "own kernel:$H=False" --json "$OUT/mixer_norm_ab_lfm.json" 2>&1 | grep "tok/s"
  for cfg in "qwen3.6-35b-a3b" "qwen3.6-35b-a3b --fp8" "lfm2.5-8b-a1b" "lfm2.5-8b-a1b --fp8"; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
esac
