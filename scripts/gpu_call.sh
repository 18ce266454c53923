export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python3 -m fastpath.bench attention --graphs --json $OUT/bench.jsonl 2>&1 | grep "eager\|graph" | cut -c1-140
timeout 60 python3 -m fastpath.bench attention --only prefill --graphs --json $OUT/prefill2.jsonl 2>&1 | grep "eager\|graph" | cut -c1-140
timeout 60 python3 scripts/moe_profile.py --tokens 64 --dtypes fp8 --json $OUT/moe64_fp8.json 2>&1 | tail -30
timeout 260 python3 scripts/moe_profile.py --tokens 64 --dtypes bf16 --sweep --json $OUT/moe64.json 2>&1 | tail -40
