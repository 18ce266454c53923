#!/usr/bin/env bash
# One device call: engine and new-op tests compiled, the embedded model trained, decode
# benchmarks, new op suites. Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_decode.sh
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
[ -d wheels ] && pip install -q --no-index --find-links wheels diffusers 2>&1 | tail -2
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short tests/models tests/ops/test_rope.py \
  tests/ops/test_elementwise.py tests/ops/test_linalg_small.py tests/ops/test_norm.py tests/ops/test_gated_delta.py \
  tests/ops/test_pad.py tests/ops/test_conv.py tests/integrations/test_diffusers.py 2>&1 | tee "$OUT/pytest.log" | tail -30
timeout 100 python3 scripts/train_default.py --out "$OUT/default" --tokenizer src/fastpath/data/default --steps 1500 \
  2>&1 | tee "$OUT/train.log" | tail -3
tar -C "$OUT" -cf "$OUT/default.tar" default && rm -rf "$OUT/default"
B="python3 -m fastpath bench-decode --json $OUT/decode.jsonl"
for c in "--config qwen3-30b-a3b" "--config qwen3-30b-a3b --fp8" "--config qwen3-8b" "--config llama-3-8b"; do
  timeout 60 $B $c --random-weights 2>&1 | tee -a "$OUT/decode.log" | grep -v "^\s*$" | tail -2
done
timeout 150 python3 -m fastpath.bench recurrent pad conv --json "$OUT/bench.jsonl" 2>&1 | tee "$OUT/bench.log" | tail -45
