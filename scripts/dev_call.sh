export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest -v -p no:cacheprovider -rf --tb=short --durations=8 tests/ops/test_linalg_small.py > $OUT/tests_small.log 2>&1; grep -ci "passed" $OUT/tests_small.log; grep -i "failed\|error\| passed in\|timeout" $OUT/tests_small.log | tail -12; grep -A10 "slowest" $OUT/tests_small.log
timeout 150 python3 -m fastpath.bench linalg --only inv --json $OUT/bench_inv.jsonl 2>&1 | grep -v Warn | tail -10
