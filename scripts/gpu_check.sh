#!/usr/bin/env bash
# One call on a GPU machine: the test suite compiled on the GPU, then the benchmark suites.
# Usage (repo root): OUT=/some/dir bash scripts/gpu_check.sh [bench args...]
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest.log" | tail -25
timeout 240 python3 -m fastpath.bench --json "$OUT/bench.jsonl" "$@" 2>&1 | tee "$OUT/bench.log"
