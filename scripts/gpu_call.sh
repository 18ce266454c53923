export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FASTPATH_LAUNCH_MEMO=0
timeout 270 python3 scripts/moe_profile.py --tokens 64 --dtypes fp8 --sweep --budget 70 --json $OUT/moe64_fp8.json 2>&1 | grep -v Warn | tail -22
timeout 200 python3 scripts/moe_profile.py --tokens 64 --dtypes bf16 --sweep --budget 75 --json $OUT/moe64_bf16.json 2>&1 | grep -v Warn | tail -18
