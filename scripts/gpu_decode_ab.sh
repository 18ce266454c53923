#!/usr/bin/env bash
# One device call: the compiled tests of the decode path, then `fastpath bench-decode` of the
# named configs with an environment knob on (default) and off, in the same run.
# Usage (repo root, GPU machine): OUT=/some/dir KNOB=FASTPATH_FUSE_NORMS bash scripts/gpu_decode_ab.sh
# (about 8 minutes; CONFIGS overrides the configs, OFF the configs also run with KNOB=0.)
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
KNOB=${KNOB:-FASTPATH_FUSE_NORMS}
CONFIGS=${CONFIGS:-"qwen3-8b qwen3-30b-a3b lfm2.5-8b-a1b qwen3.6-35b-a3b"}
OFF=${OFF:-"qwen3-8b qwen3-30b-a3b lfm2.5-8b-a1b"}
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short tests/models tests/engine \
  tests/ops/test_linear.py::test_rms_norm_linear tests/ops/test_moe.py::test_rms_norm_router \
  tests/ops/test_moe.py::test_router 2>&1 | tee "$OUT/pytest.log" | tail -8
bench() {  # config, knob value
  env "$KNOB=$2" timeout 75 python3 -m fastpath bench-decode --json "$OUT/decode-$KNOB-$2.jsonl" \
    --random-weights --config "$1" 2>&1 | tee -a "$OUT/decode.log" | grep -i "tok/s" | tail -1 | sed "s/^/$KNOB=$2 $1: /"
}
for cfg in $CONFIGS; do bench "$cfg" 1; done
for cfg in $OFF; do bench "$cfg" 0; done
