#!/usr/bin/env bash
# One device call for the op issues (8, 9, 10): their tests compiled on the GPU (one pytest
# process per file, in parallel: compiling is CPU-bound), then the benchmark suites.
# Usage (repo root, GPU machine): OUT=/some/dir bash scripts/gpu_ops.sh [bench suites...]
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT/pytest"
# diffusers and its pure-Python deps from wheels/ (the machine has no index): into /tmp/pyd
[ -d wheels ] && python3 -m pip install -q --no-index --no-deps --target /tmp/pyd wheels/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/pyd PYTHONUNBUFFERED=1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
FILES=${TEST_FILES:-"tests/ops/test_linalg_small.py tests/ops/test_linalg_lu.py tests/ops/test_linalg_qr.py tests/ops/test_linalg_svd.py tests/ops/test_elementwise.py tests/ops/test_dropout.py tests/ops/test_batch_norm.py tests/ops/test_loss.py tests/ops/test_bincount.py tests/integrations/test_diffusers.py tests/ops/test_attention_prefill.py tests/ops/test_gated_delta.py"}
for f in $FILES; do
  n=$(basename "$f" .py)
  timeout "${TEST_TIMEOUT:-200}" python3 -m pytest -q -p no:cacheprovider --tb=short "$f" >"$OUT/pytest/$n.log" 2>&1 &
done
wait
for f in "$OUT"/pytest/*.log; do printf '%-28s %s\n' "$(basename "$f" .log)" "$(tail -1 "$f")"; done
grep -h -A12 "^FAILED\|^_____" "$OUT"/pytest/*.log | head -80
[ $# -gt 0 ] && timeout "${BENCH_TIMEOUT:-300}" python3 -m fastpath.bench --json "$OUT/bench.jsonl" "$@" 2>&1 | tee "$OUT/bench.log" | grep -v "^pass\|^\s*$" | cut -c1-230
true
