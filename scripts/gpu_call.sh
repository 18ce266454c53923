export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_moe.py > $OUT/tests.log 2>&1; grep -E "FAILED|ERROR" $OUT/tests.log | head; tail -1 $OUT/tests.log
FASTPATH_LAUNCH_MEMO=0 timeout 100 python3 scripts/moe_fp8_tokens.py --json $OUT/moe_fp8_tokens.json 2>&1 | grep -v Warn
