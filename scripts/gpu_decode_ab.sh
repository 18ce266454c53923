#!/usr/bin/env bash
# One device call: the compiled tests of the fused norms and of the models, then
# `fastpath bench-decode` of named configs with an environment knob set per run, in one session.
# Usage (repo root, GPU machine): OUT=/some/dir KNOB=FASTPATH_FUSE_NORMS bash scripts/gpu_decode_ab.sh
# (about 6 minutes; RUNS lists config:value pairs, run in that order.)
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
KNOB=${KNOB:-FASTPATH_FUSE_NORMS}
RUNS=${RUNS:-"qwen3-8b:0 qwen3-8b:1 qwen3-30b-a3b:1 qwen3-30b-a3b:0 lfm2.5-8b-a1b:1 lfm2.5-8b-a1b:0 qwen3.6-35b-a3b:1"}
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short tests/models/test_models.py \
  tests/ops/test_linear.py::test_rms_norm_linear tests/ops/test_moe.py::test_rms_norm_router 2>&1 \
  | tee "$OUT/pytest.log" | tail -4
for run in $RUNS; do
  cfg=${run%%:*}; val=${run##*:}
  env "$KNOB=$val" timeout 75 python3 -m fastpath bench-decode --json "$OUT/decode-$KNOB-$val.jsonl" \
    --random-weights --config "$cfg" 2>&1 | tee -a "$OUT/decode.log" | grep -i "tok/s" | tail -1 | sed "s/^/$KNOB=$val $cfg: /"
done
