export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 60 python3 -m fastpath.bench linalg --only "inv 4x4" --json $OUT/bench_inv4.jsonl 2>&1 | grep -v Warn | tail -3
timeout 50 python3 -m pytest -q -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_small.py -k "tiny or inv_ex" > $OUT/tests_tiny.log 2>&1; tail -2 $OUT/tests_tiny.log
