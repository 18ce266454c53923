export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -v -p no:cacheprovider -rf --tb=short --durations=5 tests/ops/test_linalg_small.py > $OUT/tests_small.log 2>&1; grep -i "failed\|error\| passed in\|timeout" $OUT/tests_small.log | tail -8
timeout 100 python3 -m fastpath.bench linalg --only inv --json $OUT/bench_inv.jsonl 2>&1 | grep -v Warn | tail -9
timeout 45 python3 scripts/tune_linalg.py --only "inv 4x4 1M" --seconds 25 2>&1 | tee $OUT/tune4.log | grep -v "Warn\|skipped"
timeout 60 python3 scripts/tune_linalg.py --only "16x16" --seconds 35 2>&1 | tee $OUT/tune16.log | grep -v "Warn\|skipped"
