export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FASTPATH_LAUNCH_MEMO=0
timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_attention_prefill.py > $OUT/tests.log 2>&1; tail -1 $OUT/tests.log
timeout 200 python3 scripts/read_bandwidth.py 2>&1 | tee $OUT/read_bw.log
timeout 220 python3 scripts/tune_prefill.py 2>&1 | tee $OUT/tune_prefill.log
