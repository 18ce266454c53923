export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 140 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_moe.py > $OUT/tests.log 2>&1; grep -E "FAILED|ERROR" $OUT/tests.log | head; tail -1 $OUT/tests.log
timeout 120 python3 -m fastpath.bench moe --graphs --json $OUT/bench.jsonl 2>&1 | grep "eager\|graph" | cut -c1-140
