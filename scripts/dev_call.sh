export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -q -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_small.py > $OUT/tests_small.log 2>&1; tail -3 $OUT/tests_small.log
timeout 200 python3 scripts/tune_linalg.py --only "x8 100K" --seconds 45 2>&1 | tee $OUT/tune8.log | grep -v "Warn\|skipped"
timeout 200 python3 scripts/tune_linalg.py --only "16x16" --seconds 60 2>&1 | tee $OUT/tune16.log | grep -v "Warn\|skipped"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rf --tb=short tests/ops/test_attention.py -k "split or decode" > $OUT/tests_attn.log 2>&1; tail -3 $OUT/tests_attn.log
