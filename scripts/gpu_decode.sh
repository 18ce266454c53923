#!/usr/bin/env bash
# One device call: new tests compiled, then decode benchmarks (fastpath and transformers in
# the same run). Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_decode.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
[ -d wheels ] && pip install -q --no-index --no-deps wheels/*.whl 2>&1 | tail -2
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short tests/models tests/engine tests/test_streams.py \
  tests/ops/test_dropout.py tests/ops/test_batch_norm.py tests/ops/test_loss.py tests/ops/test_bincount.py \
  tests/ops/test_conv.py tests/integrations/test_diffusers.py tests/ops/test_linalg_lu.py \
  tests/ops/test_linalg_qr.py tests/ops/test_linalg_svd.py 2>&1 | tee "$OUT/pytest.log" | tail -25
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl --random-weights"
run() { local t=$1; shift; timeout "$t" $B "$@" 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | grep -v "^\r\?loading" | tail -3; }
run 90 --config qwen3-30b-a3b --hf
run 60 --config qwen3-8b --hf
run 35 --config qwen3-30b-a3b --fp8
run 45 --config qwen3.6-35b-a3b
run 35 --config lfm2.5-8b-a1b
