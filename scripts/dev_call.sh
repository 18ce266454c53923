export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 300 python3 -m pytest -v -p no:cacheprovider -rf --tb=short --durations=12 tests/ops/test_linalg_small.py > $OUT/tests_small.log 2>&1; grep -i "passed\|failed\|error" $OUT/tests_small.log | tail -12; grep -A14 "slowest" $OUT/tests_small.log
timeout 150 python3 -m fastpath.bench linalg --only inv --json $OUT/bench_inv.jsonl 2>&1 | grep -v Warn | tail -12
timeout 100 python3 scripts/tune_linalg.py --only "16x16" --seconds 30 2>&1 | tee $OUT/tune16.log | grep -v "Warn\|skipped"
