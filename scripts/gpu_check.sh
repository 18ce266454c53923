#!/usr/bin/env bash
# One call on a GPU machine: the test suite compiled on the GPU, then the benchmark suites.
# Usage (repo root): OUT=/some/dir bash scripts/gpu_check.sh [bench args...]
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest.log" | tail -25
# the cached relaunch (opt-in until this passes on a GPU), and the host time it saves
FASTPATH_FAST_LAUNCH=1 timeout 120 python3 scripts/launch_check.py 2>&1 | tee "$OUT/launch_check.log" | tail -25
FASTPATH_FAST_LAUNCH=1 timeout 60 python3 scripts/launch_probe.py 2>&1 | tee "$OUT/launch_probe.log"
timeout 240 python3 -m fastpath.bench --json "$OUT/bench.jsonl" "$@" 2>&1 | tee "$OUT/bench.log"
