#!/usr/bin/env bash
# A session's first device calls (95 and 96 ran in the fifty-second session, on an H100, by hand: the rotated
# complex64 LU panel and 94's sweep cut short, which made both the defaults; 94: the fifty-first session's two lu_solve forms without a layout change in a step; 93: the fiftieth session's lu_solve memo; 82-84: the forty-eighth session's float32 linear dots, its defaults, the swiglu memo and memo probe; 80-81 ran in it; 80 waited: the forty-seventh session's float32 decode plan, 16 rows and 32 keys a split, compiled and timed against the plan before; 72 waits for a two-GPU kind; 77 and 79 ran in the forty-seventh session, 78's sweep as a command of its own; 67-68 wait: the forty-third session's memo probe, compiled linalg tests, compiled fuzz sweep; 65-66 ran in the forty-first session, 65 the bf16 records and compiled tests at the 16-bit narrow blocks, 66 the 16-row dot's split, which led to matvec.W16_ROWS_UNSPLIT_K; 64: the fortieth session's 16-bit narrow blocks, 63 its FP8 records, 62 its fp8 narrow one-row blocks, 61 its fp8 one-row column blocks, 60 its attention split A/B, 59 its fp8 expert rows sweep, 58 its one-row scaled_mm A/B, 57 its grouped_mm records, 56 its grouped_mm one-row mode, 55 its grouped_mm sweep, 54 its split-K successor probe, 53 its L2 prefetch on a side stream (removed with the code); 45-52: the thirty-ninth session's late PDL triggers, the records at its default; 35-41: the thirty-seventh session's batch_norm stages, few-row 16-bit plans, MoE routing; 34 ran in it too; 29: its tests and split-K probe ran in the thirty-sixth, its LFM2.5 FP8 prefill A/B waits;
# 30-33: the thirty-sixth's pipelined one-row plans; 27-28: the thirty-fifth's; 26: the thirty-fourth session's; 19: the thirty-second session's step kernel; 18 waits from the thirty-first session; 16-17 ran in it; 14 ran in the thirtieth; 4-9 are the twenty-sixth's runs, 10-13 the
# twenty-seventh's, to rerun):
#   1: the compiled decode-path tests (fused norms, linear, MoE, models, engine), then decode end
#      to end for every named model the README's table lists (records for docs/perf.md).
#   2: where a layer's norm runs, A/B in one process (scripts/norm_fusion_ab.py).
#   3: the fp8 one-row plan's blocks under the fused norm (norm_linear_probe.py --fp8-plans), then
#      Llama-3-8B's records (the README's rows predate the deferred norm).
#   4: the deferred norm's wave rule A/B (Llama-3-8B, Qwen3-8B), their records.
#   5: split-K counts rounded down (scripts/split_probe.py, then knob_ab in the engine).
#   6: split-K counts swept on single shapes (scripts/split_probe.py --splits).
#   7: the fp8 float16 route's SwiGLU split A/B in the engine, Llama-3-8B FP8's record.
#   8: the fp8 float16 route's SwiGLU blocks, split counts swept.
#   9: Qwen3-8B FP8's record, split counts of the fp8 one-row product-and-sum shapes swept.
# Usage (repo root, GPU machine): OUT=/some/dir FASTPATH_COMMIT=<local short hash> bash
# scripts/gpu_pending.sh 1-9. The device's checkout may not carry your last commits: pass the
# hash you ran, or the records name an older one.
set -uo pipefail
OUT=${OUT:-/tmp/fastpath-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
# sweep LOG SHAPES SETTING...: scripts/split_probe.py on SHAPES once a SETTING (matvec knobs, several
# joined by "--set"), into $OUT/LOG
sweep() {
  local log=$1 shapes=$2 sets
  shift 2
  for sets in "$@"; do
    echo "== $sets"
    timeout 120 python3 scripts/split_probe.py --shapes "$shapes" --set $sets 2>&1 | grep -v -i warn
  done 2>&1 | tee "$OUT/$log"
}
# ab JSON CONFIGS VARIANT...: scripts/knob_ab.py on 12 layers of each config, 64-token prompt and decode
ab() {
  local json=$1 configs=$2 v args=()
  shift 2
  for v in "$@"; do args+=(--variant "$v"); done
  timeout 300 python3 scripts/knob_ab.py --configs "$configs" --layers 12 --new-tokens 64 --prompt-len 64 "${args[@]}" \
    --json "$OUT/$json" 2>&1 | grep -v -i warn | tail -32
}
# compiled LOG SECONDS WORKERS PYTEST-ARGS...: the tests compiled into $OUT/LOG (WORKERS 0: one process),
# then their failures and summary line
compiled() {
  local log=$1 secs=$2 n=$3
  shift 3
  timeout "$secs" python3 -m pytest -q -n "$n" -p no:cacheprovider -rf --tb=short "$@" > "$OUT/$log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/$log" | head -20; tail -1 "$OUT/$log"
}
# issue 4's FP8 layer row (and the bf16 one beside it), module knob $1 ("module.KNOB") set to each later argument in
# turn (log $2)
layer_ab() {
  local knob=$1 log=$2 v
  shift 2
  for v in "$@"; do
    timeout 30 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --set "$knob=$v" 2>&1 | grep -v -i warn \
      | grep "graph" | sed "s/^/[$v] /"
  done | tee "$OUT/$log"
}
# complex64 lu_solve with 256 right-hand sides at each BLOCKED_PLAN entry given (log $1), then the lu_solve records
solve_plans_records() {
  local log=$1 p
  shift
  for p in "$@"; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --plan "BLOCKED_PLAN:complex64=$p" 2>&1 \
      | grep -v -i warn | grep "k=" | sed "s/^/plan $p /" | tee -a "$OUT/$log"
  done
  timeout 90 python3 -m fastpath.bench linalg --only lu_solve --graphs --json "$OUT/lu_solve_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "lu_solve"
}
# the fifty-fifth session's untimed changes, A/B (gpu_pending 109-112)
inv_ab() {
  local round tree
  for round in 1 2; do for tree in ab/old/src src; do
    echo "== inv at $tree"; PYTHONPATH=$PWD/$tree timeout 90 python3 -m fastpath.bench linalg --only inv --graphs \
      2>&1 | grep -v -i warn | grep "linalg "
  done; done 2>&1 | tee "$OUT/inv_column_ab.log"
}
solve_ab() {
  local round v
  for round in 1 2; do for v in False True; do
    timeout 60 python3 -m fastpath.bench linalg --only "solve_ex complex64" --set ops.linalg.small.SOLVE_VIA_LU=$v \
      --json "$OUT/solve_records_$v.jsonl" 2>&1 | grep -v -i warn | grep "linalg " | sed "s/^/SOLVE_VIA_LU=$v /"
  done; done 2>&1 | tee "$OUT/solve_via_lu.log"
}
LINALG_TESTS="tests/ops/test_linalg_lu.py tests/ops/test_linalg_svd.py tests/ops/test_empty_inputs.py"
# LFM2.5 FP8's prefill, two rounds of three settings of the FP8 many-row path, a process each (the
# thirty-fifth session measured 12,451-17,520 tok/s with the one-kernel dequantisation against 21,243 with
# PyTorch's, one prefill timed a process; bench-decode now takes medians of 3)
lfm_prefill_ab() {
  local round k
  for round in 1 2; do
    for k in "fp8.scaled_mm.W8_DEQUANT_FROM=65" "linear.FP8_MANY_ROWS='dequantise'" "fp8.scaled_mm.W8_DEQUANT_FROM=None"; do
      timeout 60 python3 scripts/knob_decode.py "$k" -- --config lfm2.5-8b-a1b --fp8 --random-weights --new-tokens 32 \
        --json "$OUT/lfm_prefill.jsonl" 2>&1 | grep "tok/s" | tail -1 | sed "s/^/$k /"
    done
  done
}
# one row, fp8 weights: issue 3's shapes, then the engine's (the last two with SwiGLU)
f32_decode_ab() {  # a float32 model's decode (Llama-3-8B shapes, 12 layers, random weights) under each knob setting, two rounds
  local round k
  for round in 1 2; do
    for k in "$@"; do
      timeout 100 python3 scripts/knob_decode.py "$k" -- --config llama-3-8b --random-weights --dtype float32 \
        --layers 12 --prompt-len 128 --new-tokens 128 --json "$OUT/f32_decode.jsonl" 2>&1 | grep "tok/s" | tail -1 \
        | sed "s/^/$k /"
    done
  done
}
FP8_SH=4096x4096x0x1,4096x14336x0x1,14336x4096x0x1,2048x4096x0x1,4096x2048x0x1,2048x151936x0x1,4096x128256x0x1
FP8_SH=$FP8_SH,2048x5120x0x1,2048x9216x0x1,4096x6144x0x1,4096x28672x1x1,2048x1536x1x1
case "${1:-1}" in
1)
  timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_linear.py tests/ops/test_moe.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "llama-3-8b --fp8" "qwen3.6-35b-a3b" "qwen3.6-35b-a3b --fp8" \
      "lfm2.5-8b-a1b" "lfm2.5-8b-a1b --fp8" ${EXTRA_CONFIGS:-}; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
2)
  timeout 500 python3 scripts/norm_fusion_ab.py --json "$OUT/norm_ab.json" 2>&1 | grep -v Warn ;;
3)  # the fp8 one-row plan's blocks under the fused norm (issue 7's FP8 ratio), then Llama-3-8B's records
  timeout 300 python3 scripts/norm_linear_probe.py --fp8-plans --json "$OUT/fp8_plans.json" 2>&1 | grep -v Warn
  for cfg in "llama-3-8b" "llama-3-8b --fp8"; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
4)  # the deferred norm's wave rule (Llama-3-8B / Qwen3-8B in the engine), their records
  timeout 200 python3 scripts/knob_ab.py --configs llama-3-8b,qwen3-8b --json "$OUT/defer_waves_ab.json" \
    --variant "wave rule:linear.DEFER_MIN_WAVES=4" --variant "always deferred:linear.DEFER_MIN_WAVES=0" \
    2>&1 | grep -v Warn
  for cfg in "llama-3-8b" "qwen3-8b"; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
5)  # split-K rounded down (matvec.SPLIT_FILL): kernel probe, then fp8 models in the engine
  timeout 200 python3 scripts/split_probe.py --json "$OUT/split_probe.json" 2>&1 | grep -v Warn
  timeout 330 python3 scripts/knob_ab.py --configs llama-3-8b:fp8,qwen3-30b-a3b:fp8,qwen3.6-35b-a3b:fp8,lfm2.5-8b-a1b:fp8 \
    --json "$OUT/split_fill_ab.json" --variant "fill:matvec.SPLIT_FILL=(1,)" --variant "up:matvec.SPLIT_FILL=()" \
    2>&1 | grep -v Warn ;;
6)  # the fused-norm and linear tests compiled, then split counts of one-row plans swept (split_probe.py --splits)
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_linear.py > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 300 python3 scripts/split_probe.py --json "$OUT/split_sweep.json" --splits 1,2,3,4,6,8 \
    --shapes 4096x14336x0x1,14336x4096x0x1,4096x28672x1x1,4096x4096x0x0,2048x4096x0x0,4096x2048x0x0,4096x6144x0x0,14336x4096x0x0 \
    2>&1 | grep -v Warn ;;
7)  # the fp8 float16 route with SwiGLU at half its programs per SM, in the engine; Llama-3-8B FP8's record
  timeout 200 python3 scripts/knob_ab.py --configs llama-3-8b:fp8,qwen3-8b:fp8 --json "$OUT/glu_half_ab.json" \
    --variant "half:matvec.FP8_VIA_FP16_GLU_HALF=True" --variant "as before:matvec.FP8_VIA_FP16_GLU_HALF=False" \
    2>&1 | grep -v Warn
  timeout 80 python3 -m fastpath bench-decode --config llama-3-8b --fp8 --random-weights --json "$OUT/decode.jsonl" \
    2>&1 | grep "tok/s" | tail -1 ;;
8)  # the fp8 float16 route's blocks on the SwiGLU shapes (no spills at 64 x 128 or 32 x 256, offline), splits swept
  for plan in "(64,256,4)" "(64,128,4)" "(32,256,4)"; do
    echo "FP8_VIA_FP16=$plan"
    timeout 100 python3 scripts/split_probe.py --json "$OUT/glu_blocks_$RANDOM.json" --splits 1,2,3 \
      --shapes 4096x28672x1x1,4096x24576x1x1 --set "FP8_VIA_FP16=$plan" 2>&1 | grep -v Warn
  done ;;
9)  # Qwen3-8B FP8's record; split counts of the fp8 one-row product-and-sum plan's shapes swept
  timeout 80 python3 -m fastpath bench-decode --config qwen3-8b --fp8 --random-weights --json "$OUT/decode.jsonl" \
    2>&1 | grep "tok/s" | tail -1
  timeout 120 python3 scripts/split_probe.py --json "$OUT/fma_split_sweep.json" --splits 1,2,3,4,6,8 \
    --shapes 2048x5120x0x1,4096x2048x0x1,2048x4096x0x1,4096x4096x0x1 2>&1 | grep -v Warn ;;
10)  # compiled tests; weights before the row: the router's and the norm-prologue projections', A/B
  timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_moe.py tests/ops/test_linear.py tests/ops/test_fp8.py > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 200 python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,lfm2.5-8b-a1b:fp8 --json "$OUT/wfirst_ab.json" \
    --variant "both:moe.ROUTER_W_FIRST=True;matvec.NORM_W_FIRST=True" \
    --variant "neither:moe.ROUTER_W_FIRST=False;matvec.NORM_W_FIRST=False" \
    --variant "router only:moe.ROUTER_W_FIRST=True;matvec.NORM_W_FIRST=False" \
    --variant "projections only:moe.ROUTER_W_FIRST=False;matvec.NORM_W_FIRST=True" 2>&1 | grep -v Warn
  timeout 200 python3 scripts/knob_ab.py --configs qwen3-30b-a3b,qwen3.6-35b-a3b --json "$OUT/wfirst_bf16_ab.json" \
    --variant "both:moe.ROUTER_W_FIRST=True;matvec.NORM_W_FIRST=True" \
    --variant "neither:moe.ROUTER_W_FIRST=False;matvec.NORM_W_FIRST=False" 2>&1 | grep -v Warn ;;
11)  # the fp8 one-row product-and-sum split rule (whole waves, >= 1024 of K a split) A/B; the router's rows a
     # program with its weights first; a bf16 30B step profile
  timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linear.py > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 260 python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,qwen3.6-35b-a3b:fp8,lfm2.5-8b-a1b:fp8 \
    --json "$OUT/fp8_splits_ab.json" --variant "whole waves:matvec.FP8_ONE_ROW_FMA=(16, 512, 4)" \
    --variant "as before:matvec.FP8_ONE_ROW_FMA=(16, 512, 2);matvec.FP8_ONE_ROW_FILL=False;matvec.FP8_ONE_ROW_MIN_K=512" \
    2>&1 | grep -v Warn
  timeout 200 python3 scripts/knob_ab.py --configs qwen3-30b-a3b,qwen3.6-35b-a3b --json "$OUT/router_rows_ab.json" \
    --variant "2 rows:moe.ROUTER_BLOCK_N=2" --variant "1 row:moe.ROUTER_BLOCK_N=1" --variant "4 rows:moe.ROUTER_BLOCK_N=4" \
    2>&1 | grep -v Warn
  timeout 120 python3 scripts/decode_profile.py --config qwen3-30b-a3b --json "$OUT/profile_30b.json" 2>&1 | grep -v Warn | tail -30 ;;
12)  # the records of every model the twenty-seventh session's changes touch (the README's decode table)
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "qwen3.6-35b-a3b" "qwen3.6-35b-a3b --fp8" "lfm2.5-8b-a1b" \
      "lfm2.5-8b-a1b --fp8" "llama-3-8b --fp8" "qwen3-8b --fp8"; do
    timeout 75 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
13)  # compiled decode-path tests; this session's knobs all back against all on (Qwen3-8B FP8: none should move it);
     # the fp8 one-row product-and-sum plan's column blocks (Qwen3.6's 9216 / 12352 outputs: 1.09 / 1.46 waves at 16)
  timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_linear.py tests/ops/test_moe.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 200 python3 scripts/knob_ab.py --configs qwen3-8b:fp8,qwen3-30b-a3b:fp8 --json "$OUT/s27_all_ab.json" \
    --variant "this session:moe.ROUTER_W_FIRST=True" \
    --variant "before:moe.ROUTER_W_FIRST=False;matvec.NORM_W_FIRST=False;matvec.FP8_ONE_ROW_FMA=(16, 512, 2);matvec.FP8_ONE_ROW_FILL=False;matvec.FP8_ONE_ROW_MIN_K=512" \
    2>&1 | grep -v Warn
  timeout 200 python3 scripts/knob_ab.py --configs qwen3.6-35b-a3b:fp8,qwen3-30b-a3b:fp8 --json "$OUT/fp8_blocks_ab.json" \
    --variant "16x512:matvec.FP8_ONE_ROW_FMA=(16, 512, 4)" --variant "32x256:matvec.FP8_ONE_ROW_FMA=(32, 256, 4)" \
    --variant "8x1024:matvec.FP8_ONE_ROW_FMA=(8, 1024, 4)" 2>&1 | grep -v Warn ;;
14)  # waiting from the twenty-ninth session: the QR file compiled (its graph cache's last change, 10b73f2,
     # never ran on a GPU), the blocked QR's records, and its profile (where the 4096 call's 19.9 ms go)
  timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_qr.py \
    > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 150 python3 -m fastpath.bench linalg --only qr --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -6
  timeout 100 python3 scripts/tune_qr.py --profile --sizes 4096 2>&1 | grep -v -i warn > "$OUT/qr_profile.log"
  # batches of 256x256 (eager, host-bound: 1.4-2.1 ms) with and without a graph (GRAPH_MIN_K 512 -> 128)
  timeout 100 python3 scripts/tune_qr.py --sizes 256 --batch 64 \
    --plans "[(32,64,4,True,256,2,512),(32,64,4,True,256,2,128)]" 2>&1 | grep -v -i warn ;;
15)  # waiting from the thirtieth session: the blocked LU's update plans with the thread-a-row panel
     # (tf32x3 products, row and column blocks; the panel no longer bounds a step, the update does)
  timeout 300 python3 scripts/tune_linalg.py --only lu_factor --seconds 150 --plans \
    "[(32,(64,32),8,'ieee'),(32,(64,32),8,'tf32x3'),(64,(64,64),8,'ieee'),(16,(64,32),8,'ieee'),(32,(64,16),8,'ieee')]" \
    2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log" ;;
16)  # the thirty-first session's first call: where a blocked lu_factor's time goes (scripts/lu_breakdown.py),
     # the update's loop forms, then the QR and LU files compiled (e53288c's grid change never ran on a GPU)
  timeout 150 python3 scripts/lu_breakdown.py --parts 2>&1 | grep -v -i warn | tee "$OUT/lu_breakdown.log"
  # the update's loop forms (lu.BLOCKED_UPDATE 0 / 1 / 2, tf32x3), the update as batched matmuls between
  # one launch a panel (lu.BLOCKED_HOST_UPDATE, replayed from a CUDA graph; 16- and 32-column panels, 4 warps)
  timeout 300 python3 scripts/tune_linalg.py --only lu_factor --seconds 135 --plans \
    "[(32,(64,32),8,'ieee',None,0,False),(32,(64,32),8,'ieee',None,0,True),(32,(64,32),8,'ieee',None,1,False),\
(32,(64,32),8,'ieee',None,2,False),(32,(64,32),4,'ieee',None,0,True),(32,(64,32),8,'tf32x3',None,1,False),\
(32,(64,32),8,'ieee',32,0,True)]" 2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log"
  timeout 170 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_qr.py \
    tests/ops/test_linalg_lu.py > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log" ;;
17)  # the thirty-first session's second call: the row panel's loop unrolled (lu.PANEL_UNROLL), in both
     # update forms; the QR and LU files compiled (16's run ended at 94% with three failures unnamed)
  timeout 100 python3 scripts/lu_breakdown.py --parts --cols 16,256 --set PANEL_UNROLL=True 2>&1 | grep -v -i warn \
    | grep lu_ | tee "$OUT/lu_breakdown.log"
  timeout 200 python3 scripts/tune_linalg.py --only lu_factor --seconds 95 --plans \
    "[(32,(64,32),8,'ieee',None,0,True,True),(32,(64,32),8,'ieee',None,0,False,True),\
(32,(64,32),8,'ieee',None,0,True,False)]" 2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log"
  timeout 250 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_qr.py \
    tests/ops/test_linalg_lu.py > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log" ;;
18)  # waiting from the thirty-first session: the QR and LU files compiled in full, verbose (its runs of both
     # files were cut by their time limits: three failures unnamed at 06214dc / 9d0c13e, one named at ea198ae,
     # test_lu_singular_blocked[rows], a tolerance mended in 1f814c8; test_lu_blocked_graph_replays, 04eaaee, never
     # run), then the LU records
  timeout 300 python3 -m pytest -v -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_lu.py \
    tests/ops/test_linalg_qr.py > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 200 python3 -m fastpath.bench linalg --only lu --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -9 ;;
19)  # the thirty-second session: the step after each LU panel as a kernel over (matrix, chunk) programs
     # (lu.BLOCKED_STEP "kernel"), with and without look-ahead on a second stream, against "matmul"; then
     # the LU file compiled
  timeout 100 python3 scripts/lu_breakdown.py --parts --cols 16,256 2>&1 | grep -v -i warn | tee "$OUT/lu_breakdown.log"
  timeout 260 python3 scripts/tune_linalg.py --only lu_factor --seconds 120 --plans \
    "[(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),True),(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),False),\
(32,(64,32),8,'ieee',None,'matmul'),(32,(64,32),8,'ieee',None,'kernel',((32,32),64,4),True),\
(32,(64,32),8,'ieee',None,'kernel',((64,32),32,4),True),(32,(64,32),8,'ieee',None,'kernel',((32,16),128,8),True),\
(32,(64,32),4,'ieee',None,'kernel',((32,16),64,4),True)]" 2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log"
  timeout 200 python3 -m pytest -v -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_lu.py \
    > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log" ;;
20)  # the thirty-second session's second call: the step kernel alone (19: complex64 steps ~67 us each,
     # float32 ~6), L11^-1 as Neumann products against forward substitution, the complex update as real
     # products, chunk shapes; then whole runs
  timeout 200 python3 scripts/lu_step_probe.py --variant "substitution:BLOCKED_STEP_NEUMANN=False" \
    --variant "no embed:BLOCKED_STEP_EMBED=False" --variant "neither:BLOCKED_STEP_EMBED=False,BLOCKED_STEP_NEUMANN=False" \
    --variant "cw 32:BLOCKED_STEP_CW=(32,32)" --variant "bm 32:BLOCKED_STEP_BM=32" \
    --variant "bm 128, 8 warps:BLOCKED_STEP_BM=128,BLOCKED_STEP_WARPS=8" --variant "8 warps:BLOCKED_STEP_WARPS=8" \
    --variant "cw 64, bm 32:BLOCKED_STEP_CW=(64,64),BLOCKED_STEP_BM=32" 2>&1 | grep -v -i warn | tee "$OUT/lu_probe.log"
  timeout 200 python3 scripts/tune_linalg.py --only lu_factor --seconds 90 --plans \
    "[(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),'fused'),(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),'kernel'),\
(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),'off'),(32,(64,32),8,'ieee',None,'matmul'),\
(32,(64,32),8,'ieee',None,'kernel',((32,16),32,4),'fused'),(32,(64,32),8,'ieee',None,'kernel',((32,32),64,4),'fused')]" \
    2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log"
  timeout 60 python3 scripts/lu_breakdown.py --parts --cols 256 2>&1 | grep -v -i warn | tee "$OUT/lu_breakdown.log" ;;
21)  # the thirty-second session's third call (20: a step program's chain of memory round trips, in waves,
     # was the cost): the update's loads a block ahead, U12's real blocks from registers, L11^-1 beside the
     # pivots' loads; chunk shapes, look-ahead forms; the row panel's pivot row gathered (lu.PANEL_GATHER);
     # the LU file's blocked / det tests compiled; the LU records
  timeout 150 python3 scripts/tune_linalg.py --only lu_factor --seconds 70 --plans \
    "[(32,(64,32),8,'ieee',None,'kernel',((32,16),32,4),'fused'),(32,(64,32),8,'ieee',None,'matmul'),\
(32,(64,32),8,'ieee',None,'kernel',((32,16),32,4),'kernel'),(32,(64,32),8,'ieee',None,'kernel',((32,32),32,4),'fused'),\
(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),'fused')]" 2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log"
  for g in False True; do
    timeout 40 python3 scripts/lu_breakdown.py --parts --cols 256 --set PANEL_GATHER=$g 2>&1 | grep -v -i warn \
      | sed "s/^/PANEL_GATHER=$g /" | tee -a "$OUT/lu_breakdown.log"
  done
  timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_lu.py \
    -k "blocked or det or singular or issue or graph" > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 70 python3 -m fastpath.bench linalg --only lu_factor --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -4 ;;
22)  # the thirty-third session: lu_solve's diagonal-block inverses by substitution on 16-row sub-blocks and
     # Neumann products, both passes side by side (triangular.DIAG_LEAF / DIAG_TF32X3 / DIAG_WARPS) against
     # whole-block substitution (leaf 0); the LU file's solve / blocked tests compiled; the LU records
     # (measured at 2aee314: no form faster than the sequential whole-block one, reverted; the knobs are gone)
  timeout 170 python3 scripts/tune_linalg.py --only lu_solve --seconds 50 --plans \
    "{'c64 k=256':[(32,32,64,4,1,(16,False,8)),(32,32,64,4,1,(0,False,4)),(32,32,64,4,1,(16,False,4)),\
(32,32,64,4,1,(16,True,8)),(64,32,64,8,1,(16,False,8))],'c64 k=1':[(32,32,64,4,1,(16,False,8)),(32,32,64,4,1,(0,False,4))],\
'f32':[(64,64,64,4,1,(16,True,8)),(64,64,64,4,1,(0,True,4)),(64,64,64,4,1,(16,True,4)),(64,64,64,4,1,(8,True,8)),\
(64,64,64,4,1,(32,True,8)),(128,64,64,8,1,(16,True,8))]}" 2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_solve_sweep.log"
  timeout 90 python3 -m fastpath.bench linalg --only lu_ --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -8
  timeout 270 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_lu.py \
    -k "solve or blocked_update or diagonal" > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log" ;;
23)  # the thirty-third session: the row panel's column step with 4 warps (lu_column_probe: 8 warps 1266 ns a
     # column, 4 warps 728; the memory round trip of the pivot row 1012 against 420) in both step forms
  timeout 60 python3 scripts/lu_column_probe.py --reps 64 --modes 0,1,4 --warps 2 2>&1 | grep -v -i warn | tee "$OUT/probe.log"
  timeout 400 python3 scripts/tune_linalg.py --only lu_factor --seconds 150 --plans \
    "{'c64':[(32,(64,32),8,'ieee',None,'matmul'),(32,(64,32),4,'ieee',None,'kernel',((32,16),64,4),'fused'),\
(32,(64,32),4,'ieee',None,'matmul'),(32,(64,32),4,'ieee',None,'kernel',((32,16),32,4),'fused'),\
(32,(64,32),4,'ieee',None,'kernel',((32,16),64,4),'kernel'),(32,(64,32),8,'ieee',None,'kernel',((32,16),64,4),'fused')],\
'f32':[(32,(64,32),8,'ieee',None,'kernel',((32,16),32,4),'fused'),(32,(64,32),4,'ieee',None,'kernel',((32,16),32,4),'fused'),\
(32,(64,32),4,'ieee',None,'kernel',((32,16),32,4),'kernel'),(32,(64,32),4,'ieee',None,'matmul')]}" \
    2>&1 | grep -v -i warn | grep lu_ | tee "$OUT/lu_sweep.log" ;;
24)  # the thirty-third session: complex64 row panels moving each entry as one 64-bit word (lu.PANEL_PACK;
     # the probe's memory round trip is issue-bound: 16 loads and stores a column instead of 32), A/B twice;
     # the probe's mode 7; the blocked tests compiled; the lu_factor records
  timeout 60 python3 scripts/lu_column_probe.py --reps 64 --modes 1,7 --warps 8 2>&1 | grep -v -i warn | tee "$OUT/probe.log"
  for round in 1 2; do for p in False True; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set PANEL_PACK=$p 2>&1 \
      | grep -v -i warn | sed "s/^/PANEL_PACK=$p /" | tee -a "$OUT/lu_breakdown.log"
  done; done
  timeout 240 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_lu.py \
    -k "blocked_steps or blocked_update or singular" > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 90 python3 -m fastpath.bench linalg --only "lu_factor c" --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -4 ;;
25)  # the thirty-third session: float32 row panels moving pairs of entries as 64-bit words (lu.PANEL_PACK,
     # contiguous rows of even length; complex64's form measured in 24), A/B; blocked tests compiled; records
  for p in False True; do
    timeout 45 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes float32 --set PANEL_PACK=$p 2>&1 \
      | grep -v -i warn | sed "s/^/PANEL_PACK=$p /" | tee -a "$OUT/lu_breakdown.log"
  done
  timeout 170 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linalg_lu.py \
    -k "blocked_steps or blocked_update" > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 70 python3 -m fastpath.bench linalg --only "lu_factor" --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -5 ;;
26)  # the thirty-fourth session: eager scaled_mm's tiled path through the Launcher and the launch memo (its eager
     # 4096^3 rows were 0.39x / 0.49x, graphs 1.03x / 1.06x: host time), the MoE layer bench on fastpath.router
     # (one launch for the router matmul and top-k, as the models run it), the 64-token layer's kernels
  timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider -rf --tb=short tests/ops/test_memo.py -k scaled_mm \
    > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 150 python3 scripts/host_profile.py 2>&1 | grep -v -i warn | tee "$OUT/host_profile.log"
  timeout 150 python3 -m fastpath.bench fp8 --only scaled_mm --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | tail -20
  timeout 120 python3 -m fastpath.bench moe --only "moe layer" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | tail -8
  timeout 100 env FASTPATH_LAUNCH_MEMO=0 python3 scripts/moe_profile.py --tokens 64 --dtypes bf16 2>&1 | grep -v -i warn \
    | tee "$OUT/moe64.log" ;;
27)  # for the thirty-fifth session: the one-token MoE layer's spread between processes (the thirty-fourth measured
     # 26.7-29.6 us for the same code in six processes; target 28), five fresh processes of the bench row
  for i in 1 2 3 4 5; do
    timeout 60 python3 -m fastpath.bench moe --only "moe layer" --quick --graphs 2>&1 | grep -v -i warn \
      | grep "moe layer  *1x2048x768x128x8 bfloat16 graph" | sed "s/^/process $i /" | tee -a "$OUT/one_token_spread.log"
  done ;;
28)  # the thirty-fifth session: FP8 weight-only linear above 16 rows through the tiled kernel (scaled_mm.weight_mm)
     # against the weight dequantised for cuBLAS, in the engine at batch 32 (the thirty-fourth: FP8 Qwen3-30B-A3B at
     # batch 32 decoded at 0.54x of bf16); then the compiled tests
  timeout 260 python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,llama-3-8b:fp8 --layers 12 --batch 32 \
    --prompt-len 64 --new-tokens 64 --variant "tiled:linear.FP8_MANY_ROWS='tiled'" \
    --variant "dequantised:linear.FP8_MANY_ROWS='dequantise'" --json "$OUT/fp8_many_rows_b32.json" 2>&1 | grep -v -i warn
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linear.py -k fp8 \
    > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log" ;;
29)  # for the thirty-sixth session: the compiled FP8 many-row tests with the launch memo's replay of weight_mm (40
     # rows) and its prepared split-K, the split-K probe, then LFM2.5 FP8's prefill A/B (the thirty-fifth measured 12,451-17,520 tok/s with the one-kernel
     # dequantisation against 21,243 with PyTorch's, one prefill timed a process; bench-decode now takes medians of 3)
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linear.py -k "fp8 or memo" \
    > "$OUT/tests.log" 2>&1
  grep -E "FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  # weight_mm's split-K up to 64 rows (scaled_mm.W8_SPLIT_PER_SM, prepared off)
  timeout 150 python3 scripts/fp8_rows_probe.py --rows 17,32,64 --json "$OUT/fp8_rows_split.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/fp8_rows_split.log"
  lfm_prefill_ab ;;
30)  # thirty-sixth session: the fp8 one-row product-and-sum with each tile summed over K at once (matvec.FP8_ONE_ROW_KSUM),
     # its programs a multiprocessor, on every weight size; then in the engine (batch 1)
  sweep ksum_probe.log $FP8_SH "FP8_ONE_ROW_KSUM=False" "FP8_ONE_ROW_KSUM=True" \
      "FP8_ONE_ROW_KSUM=True --set FP8_ONE_ROW_MAX_ELEMS=1099511627776" \
      "FP8_ONE_ROW_KSUM=True --set FP8_ONE_ROW_MAX_ELEMS=1099511627776 --set FP8_ONE_ROW_FMA=(16,512,2)" \
      "FP8_ONE_ROW_KSUM=True --set FP8_ONE_ROW_MAX_ELEMS=1099511627776 --set FP8_ONE_ROW_FMA=(32,256,4)"
  ab ksum_ab.jsonl qwen3-30b-a3b:fp8,llama-3-8b:fp8,qwen3.6-35b-a3b:fp8 "deferred:matvec.FP8_ONE_ROW_KSUM=False" \
    "ksum:matvec.FP8_ONE_ROW_KSUM=True" "ksum-all:matvec.FP8_ONE_ROW_KSUM=True;matvec.FP8_ONE_ROW_MAX_ELEMS=1099511627776" ;;
31)  # thirty-sixth session: the fp8 one-row product-and-sum's K loop pipelined (matvec.FP8_ONE_ROW_STAGES), with KSUM,
     # programs a multiprocessor, every weight size; then in the engine (batch 1)
  B="FP8_ONE_ROW_MAX_ELEMS=1099511627776"
  sweep stages_probe.log $FP8_SH "FP8_ONE_ROW_STAGES=None" "FP8_ONE_ROW_STAGES=3" \
      "FP8_ONE_ROW_STAGES=3 --set FP8_ONE_ROW_KSUM=True" \
      "FP8_ONE_ROW_STAGES=4 --set FP8_ONE_ROW_KSUM=True" "FP8_ONE_ROW_STAGES=3 --set FP8_ONE_ROW_KSUM=True --set $B" \
      "FP8_ONE_ROW_STAGES=3 --set FP8_ONE_ROW_KSUM=True --set $B --set FP8_ONE_ROW_FMA=(16,512,2)" \
      "FP8_ONE_ROW_STAGES=3 --set FP8_ONE_ROW_KSUM=True --set $B --set FP8_ONE_ROW_FMA=(16,512,8)" \
      "FP8_ONE_ROW_STAGES=4 --set FP8_ONE_ROW_KSUM=True --set $B --set FP8_ONE_ROW_FMA=(32,256,4)"
  ab stages_ab.jsonl qwen3-30b-a3b:fp8,llama-3-8b:fp8,qwen3.6-35b-a3b:fp8 "off:matvec.FP8_ONE_ROW_STAGES=None" \
    "s3:matvec.FP8_ONE_ROW_STAGES=3;matvec.FP8_ONE_ROW_KSUM=True" \
    "s3-all:matvec.FP8_ONE_ROW_STAGES=3;matvec.FP8_ONE_ROW_KSUM=True;matvec.$B" ;;
32)  # thirty-sixth session: 16-bit weights at one row by the pipelined product-and-sum (matvec.W16_ONE_ROW_FMA)
  sweep w16_probe.log "$(echo "$FP8_SH," | sed 's/x1,/x0,/g; s/,$//')" "W16_ONE_ROW_FMA=None" "W16_ONE_ROW_FMA=(16,512,2,3)" \
      "W16_ONE_ROW_FMA=(16,512,4,3)" "W16_ONE_ROW_FMA=(32,256,2,3)" "W16_ONE_ROW_FMA=(16,512,2,4)" \
      "W16_ONE_ROW_FMA=(16,256,4,4)" ;;
33)  # thirty-sixth session: the pipelined one-row plans on (fp8 FP8_ONE_ROW_STAGES / FP8_NORM_ONE_ROW_STAGES /
     # FP8_ONE_ROW_BIG, 16-bit W16_ONE_ROW_FMA), each turned off in the engine; then the linear bench rows
  # (as run at b3a0de5, where FP8_NORM_ONE_ROW_STAGES was 3 and W16_ONE_ROW_DEFERRED a bool, False)
  ab fp8_ab.jsonl qwen3-30b-a3b:fp8,llama-3-8b:fp8,qwen3.6-35b-a3b:fp8,lfm2.5-8b-a1b:fp8 "new:" \
    "off:matvec.FP8_ONE_ROW_STAGES=None;matvec.FP8_NORM_ONE_ROW_STAGES=None;matvec.FP8_ONE_ROW_BIG=False" \
    "norm-stages:matvec.FP8_NORM_ONE_ROW_STAGES=3" "no-big:matvec.FP8_ONE_ROW_BIG=False"
  ab w16_ab.jsonl llama-3-8b,qwen3-8b,qwen3-30b-a3b "new:" "off:matvec.W16_ONE_ROW_FMA=None" \
    "no-deferred:matvec.W16_ONE_ROW_DEFERRED=None" "deferred-always:matvec.W16_ONE_ROW_DEFERRED=1000"
  timeout 100 python3 -m fastpath.bench linear --only "fp8 weights" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -E "graph" | head -20
  timeout 100 python3 -m fastpath.bench linear --only "linear bf16" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -E "graph" | head -30 ;;
34)  # for the thirty-seventh session: Qwen3.6 bf16's record at the final code, then entry 29's LFM2.5 FP8 prefill
     # A/B (its matvec.DOT_STAGES sweep ran in entry 35; the knob is gone since: no gain)
  timeout 75 python3 -m fastpath bench-decode --config qwen3.6-35b-a3b --random-weights --json "$OUT/decode.jsonl" 2>&1 \
    | grep "tok/s" | tail -1
  lfm_prefill_ab ;;
35)  # thirty-seventh session: batch_norm's grid-wide plan with its loops pipelined through shared memory
     # (ROWS_STAGES; tiles and stages swept), its compiled tests
  timeout 90 python3 -m pytest -q -n 4 -p no:cacheprovider -rf --tb=short tests/ops/test_batch_norm.py \
    -k "large_gpu or rows or pipelined" > "$OUT/bn_tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/bn_tests.log" | head -10; tail -1 "$OUT/bn_tests.log"
  timeout 200 python3 scripts/tune_batch_norm.py --only 2d_fp32 nhwc_bf16 --budget 150 2>&1 | grep -v -i warn \
    | tee "$OUT/bn_stages.log"
  ;;  # (then matvec.DOT_STAGES swept at 4 and 16 rows, 4a19164; the knob is gone since: no gain)
36)  # thirty-seventh session: the batch_norm bench rows (graphs) under ROWS_STAGES / ROWS_TILE, two rounds; then
     # entry 34's Qwen3.6 bf16 record and LFM2.5 FP8 prefill A/B
  K=ops.batch_norm_kernel
  for round in 1 2; do
    for v in "" "ROWS_STAGES=3" "ROWS_STAGES=4" "ROWS_STAGES=3 ROWS_TILE=4096" "ROWS_STAGES=4 ROWS_TILE=4096" \
        "ROWS_STAGES=5 ROWS_TILE=4096"; do
      sets=(); for kv in $v; do sets+=(--set "$K.$kv"); done
      echo "== round $round: ${v:-default}"
      timeout 100 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs "${sets[@]}" \
        --json "$OUT/bn_bench.jsonl" 2>&1 | grep -E "graph" | grep -E "8192x1024|NHWC"
    done
  done 2>&1 | tee "$OUT/bn_bench.log"
  timeout 75 python3 -m fastpath bench-decode --config qwen3.6-35b-a3b --random-weights --json "$OUT/decode.jsonl" 2>&1 \
    | grep "tok/s" | tail -1
  lfm_prefill_ab ;;
37)  # thirty-seventh session: 16-bit weights at 2-8 rows by the product-and-sum (matvec.W16_FEW_ROWS_FMA) against
     # the 16-row dot and F.linear in one process; the batch_norm bench rows at the new default (records)
  SH="4096x4096x0x0,4096x14336x0x0,14336x4096x0x0,2048x4096x0x0,4096x2048x0x0,2048x151936x0x0,4096x6144x0x0"
  SH=$SH,2048x5120x0x0,2048x9216x0x0,2048x1536x0x0
  for rows in 2 4 8; do
    echo "== rows $rows"
    timeout 150 python3 scripts/split_probe.py --rows $rows --shapes "$SH" --variant "dot:" \
      --variant "16x128s4:W16_FEW_ROWS_FMA=(16,128,2,4,8)" --variant "16x256s3:W16_FEW_ROWS_FMA=(16,256,2,3,8)" \
      --variant "32x128s4:W16_FEW_ROWS_FMA=(32,128,2,4,8)" --variant "16x64s6:W16_FEW_ROWS_FMA=(16,64,4,6,8)" \
      --variant "8x256s4:W16_FEW_ROWS_FMA=(8,256,4,4,8)" 2>&1 | grep -v -i warn
  done 2>&1 | tee "$OUT/few_rows.log"
  timeout 100 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -E "batch_norm" ;;
38)  # thirty-seventh session: the 16-bit 2-16-row dot plan's blocks (matvec.TUNED[(2, False)]) and split rounding,
     # against F.linear in one process (37 found the product-and-sum 2-10x slower there)
  SH="4096x4096x0x0,4096x14336x0x0,14336x4096x0x0,2048x4096x0x0,4096x2048x0x0,4096x6144x0x0,2048x5120x0x0"
  SH=$SH,2048x9216x0x0,2048x1536x0x0
  T() { echo "$1:TUNED={(2, True): (True, 32, 256, 2), (2, False): ($2), (1, True): (False, 32, 256, 4), (1, False): (True, 64, 64, 8)}"; }
  for rows in 4 16; do
    echo "== rows $rows"
    timeout 200 python3 scripts/split_probe.py --rows $rows --shapes "$SH" --variant "dot:" --variant "down:SPLIT_FILL_OVERRIDE=True" \
      --variant "$(T 16x256x2 "True, 16, 256, 2")" --variant "$(T 16x256x4 "True, 16, 256, 4")" \
      --variant "$(T 32x128x4 "True, 32, 128, 4")" --variant "$(T 64x128x2 "True, 64, 128, 2")" \
      --variant "$(T 16x512x2 "True, 16, 512, 2")" --variant "$(T 32x256x3 "True, 32, 256, 3")" \
      --variant "$(T 32x64x4 "True, 32, 64, 4")" 2>&1 | grep -v -i warn
  done 2>&1 | tee "$OUT/rows_dot.log" ;;
39)  # thirty-seventh session: routing inside the gate/up row kernel (moe.ROUTE_IN_EXPERTS): compiled tests, then
     # the full models in one process each, on and off
  timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_moe.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 330 python3 scripts/knob_ab.py --configs qwen3-30b-a3b,qwen3-30b-a3b:fp8 --new-tokens 64 --prompt-len 64 \
    --variant "new:" --variant "off:moe.ROUTE_IN_EXPERTS=False" --json "$OUT/route_ab.jsonl" 2>&1 | grep -v -i warn \
    | tail -12 ;;
40)  # thirty-seventh session, at the final code: the MoE layer bench rows, then the MoE models' decode records
  timeout 120 python3 -m fastpath.bench moe --only "moe layer" --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -E "graph"
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "lfm2.5-8b-a1b" "lfm2.5-8b-a1b --fp8" "qwen3.6-35b-a3b --fp8" \
      "qwen3.6-35b-a3b"; do
    timeout 75 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
41)  # thirty-seventh session: moe_layer / rms_norm_moe through the launch memo (eager host time): compiled tests,
     # the MoE layer bench rows
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py -k moe \
    > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 120 python3 -m fastpath.bench moe --only "moe layer" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -E "eager|graph" ;;
45)  # thirty-ninth session: late PDL triggers (FASTPATH_PDL=3: a kernel lets its successor launch as its
     # programs leave their main loops) and the matrix-vector kernel's first weight tile before its wait
     # (matvec.PRE_W): compiled decode-path tests under PDL 3, then A/B in one process a config set
  FASTPATH_PDL=3 timeout 240 python3 -m pytest -q -n 12 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_linear.py tests/ops/test_moe.py tests/ops/test_attention.py tests/ops/test_rope.py \
    tests/ops/test_norm.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  P=fastpath._core.backend.PDL
  for cfgs in qwen3-8b qwen3-30b-a3b,qwen3-30b-a3b:fp8; do
    ab "pdl_ab_${cfgs//[,:]/_}.json" "$cfgs" "exit:$P=1;matvec.PRE_W=False" "exit, first tile:$P=1" \
      "late:$P=3;matvec.PRE_W=False" "late, tile before wait:$P=3"
  done
  ab pdl_ab_hybrids.json lfm2.5-8b-a1b,qwen3.6-35b-a3b "exit:$P=1;matvec.PRE_W=False" "late, tile before wait:$P=3" ;;
46)  # thirty-ninth session: late triggers by kernel module (backend.PDL_LATE): compiled tests of the kernels that
     # took one since 45 (gated delta step, conv1d) and the models under PDL 3, then A/B in one process a config set
  FASTPATH_PDL=3 timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -rf --tb=short tests/ops/test_gated_delta.py \
    tests/ops/test_gated_delta_conv.py tests/ops/test_linear.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  P=fastpath._core.backend.PDL L=fastpath._core.backend.PDL_LATE
  for cfgs in qwen3-8b qwen3-30b-a3b,qwen3-30b-a3b:fp8 lfm2.5-8b-a1b,qwen3.6-35b-a3b; do
    ab "pdl_late_ab_${cfgs//[,:]/_}.json" "$cfgs" "exit:$P=1" "late:$P=3" \
      "late, not matvec:$P=3;$L={'attention','moe_kernels','norm','rope','gated_delta','conv1d'}" \
      "late, matvec only:$P=3;$L={'matvec'}"
  done ;;
47)  # thirty-ninth session: late triggers without the gated delta step's and SwiGLU projections' (matvec.LATE_GLU)
  P=fastpath._core.backend.PDL L=fastpath._core.backend.PDL_LATE
  FASTPATH_PDL=3 timeout 100 python3 -m pytest -q -n 12 -p no:cacheprovider -rf --tb=short tests/ops/test_linear.py \
    -k "swiglu or glu" > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  for cfgs in qwen3-8b qwen3-30b-a3b,qwen3-30b-a3b:fp8 lfm2.5-8b-a1b,qwen3.6-35b-a3b; do
    ab "pdl_late2_ab_${cfgs//[,:]/_}.json" "$cfgs" "exit:$P=1" "late:$P=3" "late, SwiGLU too:$P=3;matvec.LATE_GLU=True" \
      "late, not matvec:$P=3;$L={'attention','moe_kernels','norm','rope','conv1d'}"
  done ;;
48)  # thirty-ninth session: the projections' late triggers by split (matvec.LATE_SPLIT) on the dense model
  P=fastpath._core.backend.PDL L=fastpath._core.backend.PDL_LATE
  ab pdl_split_ab.json qwen3-8b,llama-3-8b,qwen3-30b-a3b "exit:$P=1" "late, not matvec:$P=3;$L={'attention','moe_kernels','norm','rope','conv1d'}" \
      "late, split matvec only:$P=3;matvec.LATE_SPLIT=True" "late, unsplit matvec only:$P=3;matvec.LATE_SPLIT=False" ;;
49)  # thirty-ninth session, the new default (FASTPATH_PDL=3, late triggers): compiled decode-path tests, the MoE
     # layer bench rows, then the decode records of the MoE models
  timeout 200 python3 -m pytest -q -n 12 -p no:cacheprovider -rf --tb=short tests/ops/test_norm_fused.py \
    tests/ops/test_linear.py tests/ops/test_moe.py tests/ops/test_attention.py tests/ops/test_rope.py tests/ops/test_norm.py \
    tests/ops/test_gated_delta.py tests/ops/test_gated_delta_conv.py tests/models tests/engine > "$OUT/tests.log" 2>&1
  grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20; tail -1 "$OUT/tests.log"
  timeout 120 python3 -m fastpath.bench moe --only "moe layer" --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -E "graph"
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "qwen3.6-35b-a3b" "qwen3.6-35b-a3b --fp8" ${EXTRA_CONFIGS:-}; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
50)  # thirty-ninth session, the new default: the decode records of the other named models
  for cfg in "lfm2.5-8b-a1b" "lfm2.5-8b-a1b --fp8" "qwen3-8b" "llama-3-8b" "llama-3-8b --fp8" ${EXTRA_CONFIGS:-}; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done ;;
51)  # thirty-ninth session: split-K projections' trigger in the last program, as it combines (matvec.LATE_SPLIT='last',
     # as at 03fc294; removed after this run: slower on the dense models)
  P=fastpath._core.backend.PDL
  ab pdl_last_ab.json qwen3-8b,llama-3-8b,qwen3-30b-a3b,qwen3-30b-a3b:fp8 "exit:$P=1" "late (default):" \
    "late, split-K in the last program:matvec.LATE_SPLIT='last'" ;;
52)  # thirty-ninth session: two projections back to back in a graph under the late-trigger settings
  P=fastpath._core.backend.PDL
  timeout 240 python3 scripts/pdl_pair_probe.py --rounds 3 --variant "exit:$P=1" --variant "late (default):" \
    --variant "late, split-K too:matvec.LATE_SPLIT=None" --variant "late, split-K in the last program:matvec.LATE_SPLIT='last'" \
    2>&1 | grep -v -i warn | tee "$OUT/pdl_pair_probe.log" ;;
54)  # fortieth session: the split-K trigger's successor loss against the successor's programs a multiprocessor
  P=fastpath._core.backend.PDL; S="matvec.LATE_SPLIT=None"; W=matvec.W16_ONE_ROW_FMA
  timeout 300 python3 scripts/pdl_pair_probe.py --rounds 2 --resources --pairs 12288x4096:4096x6144,12288x4096:4096x4096 \
    --variant "late (default):" --variant "late, split-K too:$S" \
    --variant "5 stages:$W=(16,512,2,5)" --variant "5 stages, split-K too:$W=(16,512,2,5);$S" \
    --variant "4 a SM:$W=(16,512,4,3)" --variant "4 a SM, split-K too:$W=(16,512,4,3);$S" \
    2>&1 | grep -v -i warn | tee "$OUT/pdl_pair_probe.log" ;;
55)  # fortieth session: grouped_mm's decode-like plan swept (issue 4's one-token gate/up, 13 us)
  timeout 300 python3 scripts/tune_grouped_mm.py --tokens 1,8 --rounds 2 2>&1 | grep -v -i warn | tee "$OUT/tune_grouped_mm.log" ;;
56)  # fortieth session: grouped_mm's one-row mode (ROWS_MAX) swept against the tiled decode plan
  timeout 100 python3 -m pytest -q -n 4 -p no:cacheprovider -rf --tb=short tests/ops/test_grouped_mm.py 2>&1 | tail -3
  timeout 150 python3 scripts/tune_grouped_mm.py --tokens 1,8 --rounds 2 --plans "[(64,128,4,4),(32,128,2,4)]" 2>&1 \
    | grep -v -i warn | tee "$OUT/tune_grouped_mm.log"
  timeout 200 python3 scripts/tune_grouped_mm.py --tokens 1,8 --rounds 2 --knob ROWS_PLAN --plans \
    "[(16,512,4,3),(16,256,4,4),(32,256,4,3),(16,512,4,4),(8,512,4,3),(16,1024,4,3),(16,512,8,3),(32,512,8,3)]" \
    2>&1 | grep -v -i warn | tee -a "$OUT/tune_grouped_mm.log" ;;
57)  # fortieth session: grouped_mm's one-row mode on by default up to 16 rows: compiled tests, the moe bench's grouped_mm rows
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_grouped_mm.py tests/ops/test_moe.py \
    2>&1 | tail -3
  timeout 200 python3 -m fastpath.bench moe --only "grouped_mm gate_up" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | tail -12 ;;
58)  # fortieth session: scaled_mm at one row on the product-and-sum plan (fp8.scaled_mm.ONE_ROW_FMA), tests then A/B twice
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_fp8.py 2>&1 | tail -3
  for round in 1 2; do
    for v in False True; do
      echo "== ONE_ROW_FMA=$v round $round"
      timeout 100 python3 -m fastpath.bench fp8 --only "scaled_mm" --graphs --set ops.fp8.scaled_mm.ONE_ROW_FMA=$v \
        --json "$OUT/scaled_mm_fma_$v.jsonl" 2>&1 | grep -E "^fp8 .*(1x|16x)" | grep graph
    done
  done 2>&1 | tee "$OUT/scaled_mm_fma_ab.log" ;;
59)  # fortieth session: the one-token fp8 expert row kernels' blocks swept again (last at e30c2f8, before routing moved in)
  FASTPATH_LAUNCH_MEMO=0 timeout 240 python3 scripts/moe_profile.py --rows --dtypes fp8 --json "$OUT/moe_rows_fp8.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/moe_rows_fp8.log" ;;
60)  # fortieth session: decode attention's KV splits in the engine at the records' cache (512-token prompt, 256 new)
  A=attention
  timeout 400 python3 scripts/knob_ab.py --configs qwen3-30b-a3b,qwen3-8b --layers 12 --prompt-len 512 --new-tokens 256 \
    --variant "default:" --variant "2 splits:$A.SPLIT_OVERRIDE=2" --variant "3 splits:$A.SPLIT_OVERRIDE=3" \
    --variant "12 splits:$A.SPLIT_OVERRIDE=12" --variant "64 keys a split:$A.MIN_KV_PER_SPLIT=64" \
    --variant "64-key tiles:$A.BLOCK_N=64" --json "$OUT/attention_splits_ab.json" 2>&1 | grep -v -i warn | tail -26 ;;
61)  # fortieth session: the fp8 one-row product-and-sum plan's column blocks on issue 3's shapes (no split-K combine at 8 columns)
  timeout 300 python3 scripts/split_probe.py --shapes 4096x4096x0x1,2048x4096x0x1,4096x2048x0x1,4096x14336x0x1,14336x4096x0x1 \
    --variant "default:" --variant "8 columns:FP8_ONE_ROW_FMA=(8,512,4)" --variant "8 columns, 8 a SM:FP8_ONE_ROW_FMA=(8,512,8)" \
    --variant "8 x 1024:FP8_ONE_ROW_FMA=(8,1024,4)" --variant "no split:SPLIT_K_OVERRIDE=1" 2>&1 | grep -v -i warn \
    | tee "$OUT/fp8_one_row_cols.log" ;;
62)  # fortieth session: fp8 one-row narrow unsplit blocks (matvec.FP8_ONE_ROW_NARROW): compiled tests, engine A/B, records
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linear.py tests/ops/test_norm_fused.py \
    2>&1 | tail -3
  ab fp8_narrow_ab.json llama-3-8b:fp8,qwen3-8b:fp8,qwen3-30b-a3b:fp8,lfm2.5-8b-a1b:fp8,qwen3.6-35b-a3b:fp8 \
    "narrow (default):" "16 columns, split:matvec.FP8_ONE_ROW_NARROW=None"
  timeout 120 python3 -m fastpath.bench linear --only "linear fp8 weights" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | grep " 1x" ;;
63)  # fortieth session: the narrow fp8 blocks under Qwen3.6's group norm, then the FP8 decode records
  ab fp8_narrow_group_ab.json qwen3.6-35b-a3b:fp8 "narrow (default):" "not under a group norm:matvec.FP8_ONE_ROW_NARROW_GROUP=False" \
    "16 columns, split:matvec.FP8_ONE_ROW_NARROW=None"
  for cfg in "llama-3-8b --fp8" "qwen3-8b --fp8" "qwen3-30b-a3b --fp8" "lfm2.5-8b-a1b --fp8" "qwen3.6-35b-a3b --fp8"; do
    timeout 80 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 \
      | grep "tok/s" | tail -1
  done
  timeout 80 python3 scripts/knob_decode.py "matvec.FP8_ONE_ROW_NARROW_GROUP=False" -- --config qwen3.6-35b-a3b --fp8 \
    --random-weights --json "$OUT/decode.jsonl" 2>&1 | grep "tok/s" | tail -1 ;;
64)  # fortieth session: the same narrow unsplit blocks for 16-bit weights at one row (matvec.W16_ONE_ROW_NARROW)
  N=W16_ONE_ROW_NARROW
  timeout 120 python3 scripts/split_probe.py --shapes 4096x4096x0x0,2048x4096x0x0,4096x2048x0x0,4096x6144x0x0,2048x5120x0x0 \
    --variant "default:" --variant "8 x 512:$N=(8,512)" --variant "8 x 1024:$N=(8,1024)" --variant "no split:SPLIT_K_OVERRIDE=1" \
    2>&1 | grep -v -i warn | tee "$OUT/w16_narrow.log"
  ab w16_narrow_ab.json qwen3-8b,llama-3-8b,qwen3-30b-a3b "default:" "8 x 512:matvec.$N=(8,512)" "8 x 1024:matvec.$N=(8,1024)" ;;
65)  # fortieth session: 16-bit narrow blocks on by default: compiled linear tests, the bf16 decode records
  timeout 60 python3 -m pytest -q -n 8 -p no:cacheprovider -rf --tb=short tests/ops/test_linear.py -k "narrow or one_row" 2>&1 | tail -1
  for cfg in qwen3-8b llama-3-8b qwen3-30b-a3b; do
    timeout 60 python3 -m fastpath bench-decode --config $cfg --random-weights --json "$OUT/decode.jsonl" 2>&1 | grep "tok/s" | tail -1
  done ;;
66)  # for the forty-first session: the 16-row dot's split-K at 4 and 16 rows (issue 3's 2048 -> 4096 at 0.91x), as the
     # one-row plans' (gpu_pending 61/64: unsplit narrow blocks won there)
  for rows in 4 16; do
    timeout 150 python3 scripts/split_probe.py --rows $rows --shapes 4096x2048x0x0,4096x4096x0x0,2048x4096x0x0,4096x14336x0x0 \
      --variant "default:" --variant "no split:SPLIT_K_OVERRIDE=1" --variant "16 columns, unsplit:TUNED={(2,True):(True,32,256,2),(2,False):(True,16,256,2),(1,True):(False,32,256,4),(1,False):(True,64,64,8)};SPLIT_K_OVERRIDE=1" \
      --variant "16 columns:TUNED={(2,True):(True,32,256,2),(2,False):(True,16,256,2),(1,True):(False,32,256,4),(1,False):(True,64,64,8)}" 2>&1 | grep -v -i warn
  done | tee "$OUT/rows_split.log" ;;
67)  # for the forty-fourth session: which eager 4/16-row linear calls replay the launch memo (eager trails graph by
     # 16-29 us there, 2.4 at one row), bincount's rows (2M skewed / uniform now also
     # without the sync, in graphs), the compiled LU / SVD / empty-input tests (68: fuzz_ops --cuda, linalg rows)
  timeout 150 python3 scripts/memo_probe.py 2>&1 | grep -v -i warn | tee "$OUT/memo_probe.log"
  timeout 120 python3 -m fastpath.bench training --only bincount --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn
  compiled linalg_tests.log 240 8 $LINALG_TESTS ;;
68)  # forty-third session, second call: the random sweep compiled, then the LU / SVD rows after the NaN changes
  timeout 330 python3 scripts/fuzz_ops.py 43 300 --cuda 2>&1 | grep -v -i warn | tail -40 | tee "$OUT/fuzz_cuda.log"
  for o in "svd" "pinv" "lu_" "det"; do
    timeout 60 python3 -m fastpath.bench linalg --only "$o" --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn
  done ;;
70)  # forty-fourth session, not run (no device after its first calls): the fp8 short-K fix compiled, the QR
     # fuzz failure's probe, the no-minlength bincount's speculative bins timed
  timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider -rf tests/ops/test_fp8.py -k "scaled_mm" 2>&1 | tail -3
  # (forty-fifth: torch's QR path scaled by a power of two on the GPU; these fail without it if the
  # fuzz case was an overflow)
  timeout 100 python3 -m pytest -q -p no:cacheprovider -rf tests/ops/test_linalg_qr.py -k "scaled or torch_path" 2>&1 | tail -3
  timeout 120 python3 scripts/qr_scale_probe.py 2>&1 | grep -v -i warn | tee "$OUT/qr_scale_probe.log"
  timeout 100 python3 scripts/sync_probe.py --spec 1024 2048 8192 2>&1 | grep -v -i warn | tee "$OUT/sync_probe.log"
  timeout 330 python3 scripts/fuzz_ops.py 45 300 --cuda 2>&1 | grep -v -i warn | tail -20 | tee "$OUT/fuzz_cuda.log" ;;
71)  # forty-fifth session (no device): every op past 2**31 elements (int32 offsets that wrap), compiled
  timeout 400 python3 -m pytest -q -p no:cacheprovider -rf --tb=short tests/ops/test_large_offsets.py \
    > "$OUT/large_offsets.log" 2>&1
  grep -E "^FAILED|^ERROR|Error" "$OUT/large_offsets.log" | head -30; tail -1 "$OUT/large_offsets.log" ;;
72)  # forty-fifth session: ops on cuda:1 while cuda:0 is current (needs a two-GPU kind: nvidia-h100-x2)
  timeout 300 python3 -m pytest -q -p no:cacheprovider -rf --tb=short tests/test_second_gpu.py 2>&1 | tail -15 ;;
73)  # forty-sixth session, first call: 70's compiled checks without its sweeps, then 71 (every op past 2**31)
  compiled fp8.log 150 8 tests/ops/test_fp8.py -k scaled_mm
  compiled qr.log 100 0 tests/ops/test_linalg_qr.py -k "scaled or torch_path"
  timeout 100 python3 scripts/qr_scale_probe.py 2>&1 | grep -v -i warn | tee "$OUT/qr_scale_probe.log" | tail -15
  compiled large_offsets.log 220 0 tests/ops/test_large_offsets.py ;;
74)  # forty-sixth session, second call: the random sweep compiled (fuzz_ops --cuda), 67's memo probe and compiled linalg tests
  timeout 250 python3 scripts/fuzz_ops.py 46 220 --cuda 2>&1 | grep -v -i warn | tail -20 | tee "$OUT/fuzz_cuda.log"
  timeout 100 python3 scripts/sync_probe.py --spec 1024 2048 8192 2>&1 | grep -v -i warn | tee "$OUT/sync_probe.log"
  compiled linalg_tests.log 200 8 $LINALG_TESTS ;;
75)  # forty-sixth session, third call: the float32 short-K linear fix compiled, the linalg tests 74 cut short, fuzz again
  compiled linear.log 150 8 tests/ops/test_linear.py
  compiled linalg_tests.log 180 16 $LINALG_TESTS
  timeout 130 python3 scripts/fuzz_ops.py 50 110 --cuda 2>&1 | grep -v -i warn | tail -20 | tee "$OUT/fuzz_cuda.log" ;;
76)  # forty-sixth session: test_linear compiled at the final plan; which compiled linalg tests 74 and 75 never
     # finished (both stopped at 93-97%), by name
  compiled linear.log 60 16 tests/ops/test_linear.py
  timeout 100 python3 -m pytest -v -n 16 -p no:cacheprovider -rf --tb=short $LINALG_TESTS > "$OUT/linalg_v.log" 2>&1
  python3 -m pytest -q --collect-only -p no:cacheprovider $LINALG_TESTS 2>/dev/null | grep :: > "$OUT/collected.txt"
  grep -oE "tests/[^ ]+::[^ ]+" "$OUT/linalg_v.log" | sort -u > "$OUT/done.txt"
  grep -vxFf "$OUT/done.txt" "$OUT/collected.txt" | head -40; grep -E "FAILED|ERROR" "$OUT/linalg_v.log" | head ;;
77)  # forty-seventh session, first call: 76, the prefill tail chunk's decode stages timed, eager training host
     # time by function, the training suite's rows on the H200
  bash "$0" 76
  FASTPATH_LAUNCH_MEMO=0 timeout 120 python3 scripts/decode_stages_probe.py 2>&1 | grep -v -i warn | tee "$OUT/stages.log"
  timeout 90 python3 scripts/host_profile.py --profile 2>&1 | grep -v -i warn > "$OUT/host_profile.log"; head -40 "$OUT/host_profile.log"
  timeout 170 python3 -m fastpath.bench training --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | cut -c1-200 ;;
78)  # forty-seventh session, second call (two GPUs): 72, then float32 decode attention's tiles swept
  bash "$0" 72
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts timeout 300 python3 scripts/decode_fp32_probe.py 2>&1 \
    | grep -v -i warn | tee "$OUT/fp32_probe.log" ;;
79)  # forty-seventh session, third call: float32 attention through tf32x3 dots (attention_prefill.F32_PREC):
     # the attention tests compiled, then the precisions and tiles swept against torch
  compiled attention.log 280 16 tests/ops/test_attention.py tests/ops/test_attention_prefill.py tests/models tests/engine
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts timeout 300 python3 scripts/decode_fp32_probe.py 2>&1 \
    | grep -v -i warn | tee "$OUT/fp32_probe.log" ;;
80)  # forty-seventh session, fourth call: float32 decode at 16 rows and 32 keys a split, compiled and timed
  compiled attention.log 100 16 tests/ops/test_attention.py tests/ops/test_attention_prefill.py
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts timeout 120 python3 scripts/decode_fp32_probe.py --quick 2>&1 \
    | grep -v -i warn | tee "$OUT/fp32_probe.log"
  [ -n "${BENCH:-}" ] && timeout 150 python3 -m fastpath.bench attention --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | cut -c1-200 ;;
81)  # forty-seventh session, for the next: float32 linear (1-64 rows) and fused_experts against torch (exact dots)
  PYTHONPATH=$PYTHONPATH:scripts timeout 200 python3 scripts/fp32_dots_probe.py 2>&1 | grep -v -i warn | tee "$OUT/fp32_dots.log" ;;
82)  # forty-eighth session: float32 linear at 9-16 rows on tf32x3 dots (matvec.F32_DOT_PREC), compiled and
  # timed against exact dots and F.linear; one-row float32 tiles (FMA_TILE) swept
  compiled linear.log 150 16 tests/ops/test_linear.py
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts timeout 300 python3 scripts/fp32_dots_probe.py 2>&1 \
    | grep -v -i warn | tee "$OUT/fp32_dots.log" ;;
83)  # forty-eighth session: float32 linear's defaults (the dot from 5 rows on (64, 128, 1), FMA_TILE 16384)
  # compiled and recorded (bench rows "linear fp32"), beside the bf16 rows
  compiled linear.log 200 16 tests/ops/test_linear.py tests/ops/test_fp8.py
  timeout 240 python3 -m fastpath.bench linear --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn | cut -c1-200 ;;
84)  # forty-eighth session: linear_swiglu and evaluation mse_loss through their launch memos (compiled replay tests;
  # swiglu's eager bench rows); which
  # eager calls replay their memo on a GPU and their host time against torch's (scripts/memo_probe.py, widened)
  compiled memo.log 120 8 tests/ops/test_linear.py -k "memo" tests/ops/test_memo.py
  timeout 200 python3 scripts/memo_probe.py 2>&1 | grep -v -i warn | tee "$OUT/memo_probe.log"
  timeout 120 python3 -m fastpath.bench linear --only swiglu --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn \
    | cut -c1-200 ;;
85)  # forty-ninth session: float32 one-row linear on a product-and-sum summed over K (matvec.F32_ONE_ROW_FMA),
  # compiled, then its tiles swept against FMA_TILE's plan and F.linear
  compiled f32_one_row.log 100 8 tests/ops/test_linear.py -k "f32_one_row or test_linear"
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts ROWS=1 EXPERTS=0 timeout 240 python3 scripts/fp32_dots_probe.py \
    2>&1 | grep -v -i warn | tee "$OUT/fp32_one_row.log" ;;
86)  # forty-ninth session: the blocked solve's diagonal-block inverses with M's columns read from memory
  # (triangular.DIAG_FROM_MEMORY then, DIAG_PLAN now), their warps and blocks a program, compiled and swept on lu_solve
  compiled diag.log 150 8 tests/ops/test_linalg_lu.py -k "solve"
  C="(32, 32, 64, 4, 1"; F="(64, 64, 64, 4, 1"
  CP="[$C), $C, False, 2, None), $C, True, 4, None), $C, True, 2, None), $C, True, 1, None), $C, True, 4, 2), $C, True, 2, 2), $C, True, 1, 2), $C, True, 1, 4)]"
  FP="[$F), $F, False, 2, None), $F, True, 4, None), $F, True, 2, None), $F, True, 1, None), $F, True, 4, 2), $F, True, 2, 2)]"
  timeout 400 python3 scripts/tune_linalg.py --only lu_solve --seconds 120 \
    --plans "{'c64 k=256': $CP, 'c64 k=1': $CP, 'f32 k=256': $FP}" 2>&1 | grep -v -i warn | tee "$OUT/diag_sweep.log" ;;
87)  # forty-ninth session: float32 one-row linear on F32_ONE_ROW_FMA by default, compiled and recorded (bench rows
  # "linear fp32": 1-16 rows)
  compiled linear.log 200 16 tests/ops/test_linear.py tests/ops/test_fp8.py
  timeout 200 python3 -m fastpath.bench linear --only "linear fp32" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | cut -c1-200 ;;
88)  # forty-ninth session: float32 linear at 2-4 rows: the product-and-sum's blocks and stages (matvec.F32_FEW_ROWS,
  # removed after it: no gain)
  # swept against FMA_TILE's plan, the tf32x3 dot from 2 rows and F.linear
  compiled f32_rows.log 100 8 tests/ops/test_linear.py -k "f32_"
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts ROWS=2,4 EXPERTS=0 timeout 300 python3 scripts/fp32_dots_probe.py \
    2>&1 | grep -v -i warn | tee "$OUT/fp32_few_rows.log" ;;
89)  # forty-ninth session, last call: the linalg solve tests compiled at complex64's new diagonal-inverse default
  # (triangular.DIAG_PLAN), float32 linear's, and the forward + backward host split (torch, an empty Function, ours)
  compiled lu_solve.log 200 16 tests/ops/test_linalg_lu.py tests/ops/test_linear.py -k "solve or diag or f32_"
  timeout 120 python3 scripts/autograd_host_probe.py 2>&1 | grep -v -i warn | tee "$OUT/autograd_host.log" ;;
90)  # forty-ninth session: a float32 model's decode with and without the float32 one-row plan (matvec.F32_ONE_ROW_FMA;
  # Llama-3-8B shapes cut to 12 layers, random weights), two rounds
  f32_decode_ab "matvec.F32_ONE_ROW_FMA=None" "matvec.F32_ONE_ROW_FMA=(16, 512, 2, 3)" ;;
91)  # forty-ninth session: float32 one-row SwiGLU projections on the one-row plan (matvec.F32_ONE_ROW_GLU), compiled
  # and timed against FMA_TILE's blocks and F.linear + silu * up
  compiled f32_glu.log 100 8 tests/ops/test_linear.py -k "f32_"
  FASTPATH_LAUNCH_MEMO=0 PYTHONPATH=$PYTHONPATH:scripts ROWS= EXPERTS=0 SWIGLU=1 timeout 120 python3 scripts/fp32_dots_probe.py \
    2>&1 | grep -v -i warn | tee "$OUT/fp32_glu.log" ;;
92)  # forty-ninth session, for the next: float32 projections under a fused norm on the one-row plan
  # (matvec.F32_ONE_ROW_NORM, off), compiled, then a float32 model's decode with it on and off, two rounds
  compiled f32_norm.log 120 8 tests/ops/test_norm_fused.py -k "f32_one_row or test_rms_norm_linear"
  f32_decode_ab "matvec.F32_ONE_ROW_NORM=False" "matvec.F32_ONE_ROW_NORM=True" ;;
93)  # fiftieth session, for the next: the lu_solve launch memo (lu.MEMO, off) compiled and replayed, then
  # host time a call and graph replay with it on and off, and the lu_solve / solve_triangular records
  compiled lu_memo.log 200 8 tests/ops/test_linalg_lu.py
  for m in False True; do
    echo "== lu.MEMO=$m"
    timeout 100 python3 scripts/lu_solve_rhs.py --ks 1,4,256 --host --set ops.linalg.lu.MEMO=$m 2>&1 | grep -E "k=|host"
  done 2>&1 | tee "$OUT/lu_memo_host.log"
  timeout 200 python3 -m fastpath.bench linalg --only lu_ --graphs --set ops.linalg.lu.MEMO=True 2>&1 | tail -9
  timeout 100 python3 -m fastpath.bench linalg --only solve_triangular 2>&1 | tail -3 ;;
94)  # fifty-first session, for the next: lu_solve's two new forms, off (no barrier or shared memory in a step
  # by scripts/compile_sm90.py's COMPILE_LOOPS): the diagonal-block inverses in one layout (DIAG_PLAN form 2, one
  # block a program) and the few-right-hand-side sweep 3-D (FEW_PLAN form 2), compiled, then the kernel split at
  # the default and at each form with a few column counts / chunk sizes / warps; the best becomes the default
  D=ops.linalg.triangular.DIAG_PLAN F=ops.linalg.triangular.FEW_PLAN
  for p in "" "$D:complex64=(2,1,1,4) $D:float32=(2,1,1,8)" "$D:complex64=(2,1,1,8) $D:float32=(2,1,1,16)" \
      "$D:complex64=(2,1,1,16) $D:float32=(2,1,1,32)" "$D:complex64=(2,1,1,32) $D:float32=(2,1,1,64)" \
      "$F:complex64=(32,64,4,4,2) $F:float32=(32,128,4,4,2)" "$F:complex64=(32,32,4,4,2) $F:float32=(32,64,4,4,2)" \
      "$F:complex64=(32,64,2,4,2) $F:float32=(32,128,2,4,2)" "$F:complex64=(32,64,8,4,2) $F:float32=(32,128,8,4,2)" \
      "$F:complex64=(32,64,4,4,2) $D:complex64=(2,1,1,8) $F:float32=(32,128,4,4,2) $D:float32=(2,1,1,16)"; do
    echo "== ${p:-default}"
    args=(); for kv in $p; do args+=(--set "$kv"); done
    timeout 100 python3 scripts/lu_solve_rhs.py --ks 1,2,4,256 --profile "${args[@]}" 2>&1 | grep -v -i warn
  done 2>&1 | tee "$OUT/form2.log"
  compiled form2_tests.log 150 8 tests/ops/test_linalg_lu.py -k "diag_inverse or few_form" ;;
95)  # fifty-second session: complex64 row panels with their columns rotated a place a step (lu.PANEL_ROTATE 1,
  # off; offline the panel column 636 -> 416 instructions, 215 -> 128 registers), 2: and each pivot search a
  # step early, beside the updates; the pivot row through shared memory (lu.PANEL_SMEM, the GPU's default with
  # a rotation; 338 instructions with the two-operand search) or a global slot; A/B twice, the blocked tests
  # compiled, lu_factor records
  for round in 1 2; do for p in "PANEL_ROTATE=0" "PANEL_ROTATE=1" "PANEL_ROTATE=2 --set PANEL_SMEM=False" \
      "PANEL_ROTATE=2"; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set $p 2>&1 \
      | grep -v -i warn | sed "s/^/$p /" | tee -a "$OUT/lu_rotate.log"
  done; done
  compiled rotate_tests.log 150 8 tests/ops/test_linalg_lu.py \
    -k "blocked_steps or tie_blocked or singular_blocked or no_pivoting"
  timeout 90 python3 -m fastpath.bench linalg --only "lu_factor c" --set ops.linalg.lu.PANEL_ROTATE=2 2>&1 \
    | grep -v -i warn | tail -2 ;;
96)  # fifty-second session: 94's sweep cut to four settings for a short call (the default, each form 2 at its
  # offline-best width, both), three right-hand-side counts; no compiled tests (94's, once a form wins)
  D=ops.linalg.triangular.DIAG_PLAN F=ops.linalg.triangular.FEW_PLAN
  for p in "" "$D:complex64=(2,1,1,8) $D:float32=(2,1,1,16)" "$F:complex64=(32,64,4,4,2) $F:float32=(32,128,4,4,2)" \
      "$F:complex64=(32,64,4,4,2) $D:complex64=(2,1,1,8) $F:float32=(32,128,4,4,2) $D:float32=(2,1,1,16)"; do
    echo "== ${p:-default}"
    args=(); for kv in $p; do args+=(--set "$kv"); done
    timeout 80 python3 scripts/lu_solve_rhs.py --ks 1,4,256 --profile "${args[@]}" 2>&1 | grep -v -i warn
  done 2>&1 | tee "$OUT/form2_short.log" ;;
97)  # fifty-third session: complex64 row panels whose pivot search and pivot row take one barrier
  # (lu.PANEL_ROTATE 3: redux.sync in each warp, a slot a warp in shared memory; offline the column
  # 340 -> 323 instructions, 3 barriers -> 1, 16 shuffles -> 2 redux): the compiled tests of the form,
  # A/B twice against 1 (and 3 with the panels on a high-priority stream, lu.BLOCKED_PRIORITY), then the
  # timeline of one factorisation (panels, steps, gaps) at 1, 3 and variants of 3
  compiled warps_tests.log 150 8 tests/ops/test_linalg_lu.py -k "warps or falls_back or blocked_steps or no_pivoting or tie_blocked or singular_blocked or graph_replays or in_place"
  for p in "PANEL_ROTATE=1" "PANEL_ROTATE=3" "PANEL_ROTATE=3 --set BLOCKED_PRIORITY=True" "PANEL_ROTATE=1" \
      "PANEL_ROTATE=3"; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set $p 2>&1 \
      | grep -v -i warn | sed "s/^/$p /" | tee -a "$OUT/lu_warps.log"
  done
  timeout 90 python3 scripts/lu_timeline.py --variant "PANEL_ROTATE=1" --variant "PANEL_ROTATE=3" \
    --variant "PANEL_ROTATE=3 BLOCKED_PRIORITY=True" --variant "PANEL_ROTATE=3 BLOCKED_LOOKAHEAD='kernel'" \
    2>&1 | grep -v -i warn | tee "$OUT/lu_timeline.log" ;;
98)  # fifty-third session: the linalg LU records at the defaults (lu_factor, lu_solve; graphs too), then the
  # lu_solve launch memo's host time on and off (93's second half)
  timeout 300 python3 -m fastpath.bench linalg --only lu_ --graphs --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | tail -14
  for m in False True; do
    echo "== lu.MEMO=$m"
    timeout 100 python3 scripts/lu_solve_rhs.py --ks 1,4 --host --set ops.linalg.lu.MEMO=$m 2>&1 | grep -E "k=|host"
  done 2>&1 | tee "$OUT/lu_memo_host.log" ;;
99)  # fifty-third session, for the next: the step's interchanges tracked in an unrolled loop
  # (lu.TRACK_UNROLLED, off; offline a 53-instruction loop of 4 loads a trip gone from each panel launch) and
  # complex64's left-column interchanges deferred to one launch at the end (lu.DEFER_LEFT, off): the tests
  # compiled, A/B twice (complex64, graphs), the timeline with both
  compiled track_tests.log 120 8 tests/ops/test_linalg_lu.py -k "step_orders_agree or blocked_steps"
  for round in 1 2; do for t in "TRACK_UNROLLED=False" "TRACK_UNROLLED=True" "DEFER_LEFT=True" \
      "TRACK_UNROLLED=True --set DEFER_LEFT=True"; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set $t 2>&1 \
      | grep -v -i warn | sed "s/^/$t /" | tee -a "$OUT/lu_track.log"
  done; done
  timeout 60 python3 scripts/lu_timeline.py --variant "" --variant "TRACK_UNROLLED=True DEFER_LEFT=True" 2>&1 \
    | grep -v -i warn | tee "$OUT/lu_timeline99.log" ;;
100)  # fifty-fourth session: the deferred left interchanges (lu.DEFER_LEFT, now on) with each panel's pivots
  # loaded together (99 measured the one-load-a-trip form: 150 us at the end against 77 us saved in the
  # panels), wider chunks right of the panel in its launch (lu.PANEL_RIGHT_CW, None = 32), the "matmul"
  # step with look-ahead (lu.MATMUL_AHEAD): compiled tests, A/B twice, the timeline, the lu_factor records
  # at the defaults and at each knob, lu_solve k=256 at two other plans
  compiled left_tests.log 120 8 tests/ops/test_linalg_lu.py -k "step_orders_agree or blocked or in_place"
  for round in 1 2; do for t in "DEFER_LEFT=False" "DEFER_LEFT=True" "PANEL_RIGHT_CW=128" "MATMUL_AHEAD=True"; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set $t 2>&1 \
      | grep -v -i warn | sed "s/^/$t /" | tee -a "$OUT/lu_left.log"
  done; done
  timeout 100 python3 scripts/lu_timeline.py --variant "" --variant "DEFER_LEFT=False" --variant "PANEL_RIGHT_CW=128" \
    --variant "MATMUL_AHEAD=True" \
    2>&1 | grep -v -i warn | tee "$OUT/lu_timeline100.log"
  for s in "" "--set ops.linalg.lu.PANEL_RIGHT_CW=128" "--set ops.linalg.lu.MATMUL_AHEAD=True"; do
    timeout 90 python3 -m fastpath.bench linalg --only lu_factor --graphs $s --json "$OUT/lu_records.jsonl" 2>&1 \
      | grep -v -i warn | tail -6
  done
  for p in "" "--plan BLOCKED_PLAN:complex64=(32,32,32,4)" "--plan BLOCKED_PLAN:complex64=(32,32,64,8)"; do
    echo "== lu_solve complex64 k=256 $p"; timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 $p 2>&1 \
      | grep -v -i warn | tail -3
  done 2>&1 | tee "$OUT/lu_solve_plans.log" ;;
101)  # fifty-fourth session, second call: 100 found the deferred launch's 148 us and much of the panel launches'
  # work right of the panel in uncoalesced (re, im) accesses (a warp down the rows, a sector an entry): rows now
  # moved as contiguous words (lu.UNIT_ROWS, on). Compiled tests, the knobs A/B, the timeline, the records
  compiled unit_tests.log 150 8 tests/ops/test_linalg_lu.py -k "step_orders_agree or in_place"
  for t in "UNIT_ROWS=True" "UNIT_ROWS=False" "DEFER_LEFT=False" "MATMUL_AHEAD=1" "MATMUL_AHEAD=2" \
      "UNIT_ROWS=True"; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set $t 2>&1 \
      | grep -v -i warn | sed "s/^/$t /" | tee -a "$OUT/lu_unit.log"
  done
  timeout 60 python3 scripts/lu_timeline.py --variant "" --variant "MATMUL_AHEAD=2" 2>&1 | grep -v -i warn \
    | tee "$OUT/lu_timeline101.log"
  for s in "" "--set ops.linalg.lu.MATMUL_AHEAD=2"; do
    timeout 90 python3 -m fastpath.bench linalg --only lu_factor $s --json "$OUT/lu_records.jsonl" 2>&1 \
      | grep -v -i warn | tail -4
  done ;;
102)  # fifty-fourth session, for the next: one complex64 2048x2048 factorisation (1.00x torch, H100): its panel
  # (fifty-fifth session: that size takes torch's path, lu._path; the 2048 lines below had nothing to time)
  # launch is one program doing 2032 columns right of the panel in 64 chunks, one after another; the step kernel
  # (MATMUL_AHEAD: over (matrix, chunk) programs) or wider chunks (PANEL_RIGHT_CW) spread or shorten that
  for t in "MATMUL_AHEAD=False" "MATMUL_AHEAD=1" "MATMUL_AHEAD=2" "PANEL_RIGHT_CW=128"; do
    timeout 90 python3 scripts/lu_breakdown.py --parts --batch 1 --rows 2048 --cols 2048 --dtypes complex64 \
      --set $t 2>&1 | grep -v -i warn | sed "s/^/$t /" | tee -a "$OUT/lu_2048.log"
  done
  timeout 90 python3 scripts/lu_timeline.py --n 2048 --batch 1 --variant "" --variant "MATMUL_AHEAD=2" 2>&1 \
    | grep -v -i warn | tee "$OUT/lu_timeline102.log"
  # each chunk's rows loaded while the one before is stored (lu.PANEL_PREFETCH, off), 64 x 256x256, twice
  compiled prefetch_tests.log 150 8 tests/ops/test_linalg_lu.py -k "step_orders_agree and PREFETCH"
  for round in 1 2; do for t in "PANEL_PREFETCH=False" "PANEL_PREFETCH=True"; do
    timeout 50 python3 scripts/lu_breakdown.py --parts --cols 256 --dtypes complex64 --set $t 2>&1 \
      | grep -v -i warn | sed "s/^/$t /" | tee -a "$OUT/lu_prefetch.log"
  done; done
  # complex lu_solve's blocked sweep in row words (triangular.WORDS_SWEEP, off), 256 and 32 right-hand sides, twice
  # (fifty-fifth session: 1.6x slower at 256, removed with its test after this run)
  compiled words_tests.log 120 8 tests/ops/test_linalg_lu.py -k "words_sweep"
  for round in 1 2; do for v in False True; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 32,256 --set ops.linalg.triangular.WORDS_SWEEP=$v \
      2>&1 | grep -v -i warn | grep "k=" | sed "s/^/WORDS_SWEEP=$v /" | tee -a "$OUT/lu_words.log"
  done; done ;;
103)  # fifty-fourth session, for the next: the whole linear-algebra table at the defaults (the issue's table is
  # the H200's; run it there first), eager and graphs where a case has them
  timeout 560 python3 -m fastpath.bench linalg --graphs --json "$OUT/linalg_records.jsonl" 2>&1 | grep -v -i warn \
    | tail -40 ;;
104)  # fifty-fifth session: the whole linear-algebra table at the defaults (PANEL_PREFETCH now on), then
  # solve_triangular 4096x512 at 33d9c21 (1015 us, 1.29x on the H200 then; 1477 us, 0.87x on an H100 at
  # 7546d83) against now, same GPU, twice: a regression or the GPU (old tree: old33/src, untracked)
  timeout 420 python3 -m fastpath.bench linalg --graphs --json "$OUT/linalg_records.jsonl" 2>&1 | grep -v -i warn \
    | tail -30
  for round in 1 2; do for tree in old33/src src; do
    echo "== solve_triangular at $tree"; PYTHONPATH=$PWD/$tree timeout 60 python3 -m fastpath.bench linalg \
      --only solve_triangular 2>&1 | grep -v -i warn | grep "solve_tri"
  done; done 2>&1 | tee "$OUT/solve_tri_ab.log" ;;
105)  # fifty-fifth session: the whole suite with compiled kernels (last whole run: the thirty-eighth session,
  # 4c32e69); what has not finished in the limit is listed by the log's last lines
  timeout 560 python3 -m pytest -v -n 16 -p no:cacheprovider --tb=short -o addopts="" tests > "$OUT/suite.log" 2>&1
  grep -E "FAILED|ERROR" "$OUT/suite.log" | head -40
  grep -cE " PASSED" "$OUT/suite.log"; grep -cE " SKIPPED" "$OUT/suite.log"; tail -3 "$OUT/suite.log" ;;
106)  # fifty-fifth session: complex right-hand sides' tiles in the blocked sweep as runs of words
  # (triangular.XW_LOADS, on): compiled tests, A/B twice (torch's column-major factors; ours row-major once),
  # two other plans with it, the lu_solve records
  compiled xw_tests.log 200 8 tests/ops/test_linalg_lu.py -k "word_tiles or test_lu_solve or test_solve_triangular"
  for round in 1 2; do for v in False True; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 32,256 --set ops.linalg.triangular.XW_LOADS=$v \
      2>&1 | grep -v -i warn | grep "k=" | sed "s/^/XW_LOADS=$v /" | tee -a "$OUT/lu_xw.log"
  done; done
  for v in False True; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --row-major \
      --set ops.linalg.triangular.XW_LOADS=$v 2>&1 | grep -v -i warn | grep "k=" | sed "s/^/row-major XW_LOADS=$v /" \
      | tee -a "$OUT/lu_xw.log"
  done
  solve_plans_records lu_xw.log "(32,32,32,4)" "(32,64,64,4)" ;;
107)  # fifty-fifth session: XW_LOADS from XW_MIN_KB (64) right-hand sides a program; k = 64 and 128 (32 and 64 a
  # program) with the minimum at 16 against 64, two plans with the word tiles, the lu_solve records
  for round in 1 2; do for v in 64 16; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 64,128 --set ops.linalg.triangular.XW_MIN_KB=$v \
      2>&1 | grep -v -i warn | grep "k=" | sed "s/^/XW_MIN_KB=$v /" | tee -a "$OUT/lu_xw_kb.log"
  done; done
  solve_plans_records lu_xw_kb.log "(32,32,64,8)" "(32,16,64,4)" ;;
108)  # fifty-fifth session: KB halved while the grid has fewer programs than BLOCKED_FILL x the SMs (1.0)
  # (BLOCKED_FILL was one float then; a table by dtype since)
  # against 0.5 (k = 64 took 16 a program: 462 us, against 275 at k = 128 with 32 a program)
  for v in 1.0 0.5; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 32,64,128 \
      --set ops.linalg.triangular.BLOCKED_FILL=$v 2>&1 | grep -v -i warn | grep "k=" | sed "s/^/FILL=$v /" \
      | tee -a "$OUT/lu_fill.log"
  done ;;
109)  # (history: run in the fifty-sixth session, slower; TW_LOADS removed since) fifty-fifth session: a row-major complex M's chunks as runs of words too (triangular.TW_LOADS,
  # off, untimed; offline the chunk loop 1124 -> 809 SASS instructions, 48 -> 24 global loads): compiled tests,
  # row-major factors (ours) A/B twice at 64 and 256 right-hand sides, torch's column-major ones once (no change
  # expected: TW needs unit stride along a row)
  echo "TW_LOADS was removed (fb3ecce): nothing to run" ;;
110)  # fifty-fifth session, for the next: the small-matrix kernel's column pick (small._column: the group first,
  # 688 -> 654 SASS instructions a 16x16 step, untimed) against fda44a3's, alternated twice in one call; run with
  # carry ["ab"] after `mkdir -p ab/old && git archive fda44a3 src | tar -x -C ab/old` here (ab/ is ignored)
  inv_ab ;;
111)  # fifty-fifth session, for the next: solve_ex past the small kernel through fastpath's lu_factor_ex +
  # lu_solve (small.SOLVE_VIA_LU, off, untimed): its compiled test, then the bench row off and on, twice
  compiled solve_lu_tests.log 150 4 tests/ops/test_linalg_lu.py -k "solve_via_lu"
  solve_ab ;;
112)  # (history: run in the fifty-sixth session) fifty-fifth session: 109, 110 and 111 in one call (one machine start, ~450 s); carry ["ab"] as 110
  compiled tw_solve_tests.log 200 8 tests/ops/test_linalg_lu.py \
    -k "word_tiles or test_lu_solve or test_solve_triangular or solve_via_lu"
  inv_ab; solve_ab ;;  # (and 109's TW_LOADS A/B, removed with the knob in fb3ecce)
113)  # fifty-sixth session: solve_ex past the small kernel over 13 shapes, small.SOLVE_VIA_LU off / on (a process
  # each, scripts/solve_shapes.py); complex64 lu_solve's sweep plans (BLOCKED_PLAN) at 64 / 128 / 256 right-hand
  # sides now that the right-hand sides move as words (the plan was chosen before XW_LOADS)
  for v in False True; do
    timeout 240 python3 scripts/solve_shapes.py --set ops.linalg.small.SOLVE_VIA_LU=$v 2>&1 | grep -v -i warn \
      | sed "s/^/SOLVE_VIA_LU=$v /" | tee -a "$OUT/solve_shapes.log"
  done
  for p in "(32, 32, 64, 4)" "(32, 32, 32, 4)" "(32, 32, 32, 2)" "(32, 64, 64, 4)" "(64, 32, 64, 8)" \
           "(32, 32, 128, 8)" "(16, 16, 32, 4)" "(32, 16, 64, 4)" "(32, 32, 64, 4)"; do
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 64,128,256 --plan "BLOCKED_PLAN:complex64=$p" \
      2>&1 | grep -v -i warn | grep "k=" | sed "s/^/plan $p /" | tee -a "$OUT/lu_plans.log"
  done ;;
114)  # fifty-sixth session: 113's solve shapes (and 7 more) with their parts: fastpath's and torch's lu_factor_ex and
  # lu_solve apart (where does SOLVE_VIA_LU lose: 10000 x 24x24 0.13x, one 1024x1024 complex64 0.51x)
  timeout 400 python3 scripts/solve_shapes.py --parts --set ops.linalg.small.SOLVE_VIA_LU=True 2>&1 | grep -v -i warn \
    | tee "$OUT/solve_parts.log" ;;
115)  # fifty-sixth session: where fastpath's lu_factor_ex / lu_solve beat torch's, a (n, batch) grid a dtype
  # (114: lu_factor_ex 0.18x at 10000 x 24x24, lu_solve 0.19x at one 1024x1024 complex64 with 64 right-hand sides)
  for dt in float32 complex64; do
    timeout 280 python3 scripts/lu_routes.py --dtype $dt 2>&1 | grep -v -i warn | tee "$OUT/lu_routes_$dt.log"
  done ;;
116)  # fifty-sixth session: 115 stopped on an illegal memory access in fastpath's lu_factor_ex of 4096 float32
  # 48x48 (512 ran): which batches, sizes and knobs fault (a process each, CUDA_LAUNCH_BLOCKING=1)
  probe() { CUDA_LAUNCH_BLOCKING=1 timeout 120 python3 scripts/lu_fault_probe.py "$@" 2>&1 | grep -v -i warn \
    | tee -a "$OUT/lu_fault.log"; }
  for b in 1024 2048 4096 8192; do probe 48 $b; done
  probe 64 4096; probe 40 4096; probe 33 4096; probe 64 4096 complex64; probe 128 2048
  probe 48 4096 float32 --set "ops.linalg.lu.BLOCKED_LOOKAHEAD='off'"
  probe 48 4096 float32 --set ops.linalg.lu.PANEL_PACK=False
  probe 48 4096 float32 --set "ops.linalg.lu.BLOCKED_STEP='matmul'"
  probe 48 4096 float32 --set ops.linalg.lu.UNIT_ROWS=False
  if command -v compute-sanitizer > /dev/null; then
    timeout 200 compute-sanitizer --print-limit 5 python3 scripts/lu_fault_probe.py 48 4096 2>&1 | grep -v -i warn \
      | head -60 | tee "$OUT/lu_fault_sanitizer.log"
  else echo "no compute-sanitizer"; fi ;;
117)  # fifty-sixth session: 116 found no fault alone (random A, ours first): lu_routes' A (+ 2 sqrt(n) I), torch's
  # factorisation first, then lu_routes' own sequence at n = 48 (512 then 4096) with CUDA_LAUNCH_BLOCKING=1; then
  # the rest of the float32 grid (n >= 64), which 115 did not reach
  probe() { CUDA_LAUNCH_BLOCKING=1 timeout 120 python3 scripts/lu_fault_probe.py "$@" 2>&1 | grep -v -i warn \
    | tee -a "$OUT/lu_fault2.log"; }
  probe 48 4096 float32 --shift; probe 48 4096 float32 --shift --torch-first; probe 48 4096 float32 --torch-first
  CUDA_LAUNCH_BLOCKING=1 timeout 200 python3 scripts/lu_routes.py --ns 48 --batches 512,4096 2>&1 | grep -v -i warn \
    | tail -30 | tee -a "$OUT/lu_fault2.log"
  timeout 300 python3 scripts/lu_routes.py --dtype float32 --ns 64,128,256,512,1024 2>&1 | grep -v -i warn \
    | tee "$OUT/lu_routes_float32_big.log" ;;
118)  # fifty-sixth session: after the fix (rows past m) and the routing (lu.ROUTE_BY_SPEED, SOLVE_VIA_LU on):
  # the LU tests compiled (the new GPU test first), solve_shapes at the defaults, lu_routes' grid at the defaults
  compiled lu_tests.log 240 8 tests/ops/test_linalg_lu.py tests/ops/test_linalg_small.py \
    -k "last_panel or route_by_speed or solve_via_lu or test_lu_factor or test_lu_solve or test_solve or test_inv"
  timeout 120 python3 scripts/solve_shapes.py 2>&1 | grep -v -i warn | tee "$OUT/solve_shapes_defaults.log"
  for dt in float32 complex64; do
    timeout 100 python3 scripts/lu_routes.py --dtype $dt --ns 16,32,48,64,128,256 2>&1 | grep -v -i warn \
      | tee "$OUT/lu_routes_defaults_$dt.log"
  done ;;
119)  # fifty-sixth session: lu_solve's torch route before the checks (6cf39d7): the small shapes of the grid at the
  # defaults; the routing test and lu_solve's tests compiled; torch's lu_solve with pivots out of range on a
  # routed shape (2048 systems) and ours on a kernel shape (a process each: a fault would poison the context)
  compiled lu_tests2.log 200 8 tests/ops/test_linalg_lu.py -k "route_by_speed or last_panel or test_lu_solve"
  for dt in float32 complex64; do
    timeout 60 python3 scripts/lu_routes.py --dtype $dt --ns 16,32,48,64 2>&1 | grep -v -i warn \
      | tee "$OUT/lu_routes_defaults2_$dt.log"
  done
  for b in 2048 8; do
    CUDA_LAUNCH_BLOCKING=1 timeout 60 python3 -c "
import torch
from fastpath import linalg as L
A = torch.randn($b, 16, 16, device='cuda'); LU, piv = torch.linalg.lu_factor(A); piv[0, 3] = 99; piv[-1, 0] = -5
B = torch.randn($b, 16, 1, device='cuda')
X = L.lu_solve(LU, piv, B); torch.cuda.synchronize()
print('batch $b pivots out of range: no fault, finite', bool(X.isfinite().all()))
" 2>&1 | grep -v -i warn | tail -2 | tee -a "$OUT/piv_range.log"
  done ;;
120)  # fifty-sixth session: the routed lu_solve's check with fastpath's broadcast (torch.broadcast_shapes took
  # ~8 us): the smallest shapes of the grid twice; the solve_ex bench row at the defaults (a record)
  for round in 1 2; do for dt in float32 complex64; do
    timeout 40 python3 scripts/lu_routes.py --dtype $dt --ns 16 2>&1 | grep -v -i warn | tee -a "$OUT/lu_routes_16.log"
  done; done
  timeout 60 python3 -m fastpath.bench linalg --only "solve_ex complex64" --json "$OUT/solve_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " ;;
121)  # fifty-sixth session, for the next: complex 16x16 inverses in one-warp programs (PLANS_COMPLEX[16] (16, 1, 2)
  # -> (16, 1, 1); offline sm_90 a step 931 instructions with 96 barriers and 64 shared-memory stores and loads ->
  # 699 with none, the same systems a warp): the bench row at both plans, alternated twice
  for round in 1 2; do for p in "(16, 1, 2)" "(16, 1, 1)"; do
    timeout 90 python3 -m fastpath.bench linalg --only "inv 16x16 complex64" --graphs \
      --set "ops.linalg.small.PLANS_COMPLEX:16=$p" 2>&1 | grep -v -i warn | grep "linalg " | sed "s/^/plan $p /" \
      | tee -a "$OUT/inv_c64_plan.log"
  done; done ;;
122)  # fifty-seventh session: the small kernel's steps in a loop a column group (small.GROUP_LOOPS; offline sm_90,
  # 100K 16x16 float32: a step 654 -> 605 instructions, 284 -> 204 selects): the compiled tests, then the bench's
  # inv rows off / on alternated twice (complex64 16x16 has one group: a control)
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_small.py 2>&1 | tail -2 | tee "$OUT/small_tests.log"
  for round in 1 2; do for v in False True; do
    timeout 120 python3 -m fastpath.bench linalg --only "inv " --graphs --set "ops.linalg.small.GROUP_LOOPS=$v" 2>&1 \
      | grep -v -i warn | grep "linalg " | sed "s/^/GROUP_LOOPS=$v /" | tee -a "$OUT/group_loops.log"
  done; done ;;
123)  # (run twice in the fifty-seventh session: the first run's plans after the first replayed its launch memo)
  # fifty-seventh session: 16x16 inverse plans with GROUP_LOOPS (offline sm_90, instructions a step a system:
  # float32 (8, 2, 2) 75.6 (81.8 without), (4, 1, 2) 65.6, (4, 1, 1) 65, (8, 4, 1) 56.6 at 255 registers;
  # complex64 (16, 1, 2) 465, (16, 1, 1) 350, (8, 1, 1) 198, (8, 2, 1) 149 at 250 registers), ROUNDS times (1)
  for round in $(seq "${ROUNDS:-1}"); do
    timeout 150 python3 scripts/tune_linalg.py --only "inv 16x16 100K" --seconds 140 --plans "[(8, 2, 2, False, False),
      (8, 2, 2, False), (4, 1, 2, False), (4, 1, 1, False), (4, 1, 4, False), (8, 4, 1, False), (8, 2, 1, False)]" \
      2>&1 | grep -v -i warn | tee -a "$OUT/inv16_plans.log"
    timeout 150 python3 scripts/tune_linalg.py --only "inv 16x16 c64" --seconds 140 --plans "[(16, 1, 2, False),
      (16, 1, 1, False), (8, 1, 1, False), (8, 2, 1, False), (8, 1, 1, False, False)]" \
      2>&1 | grep -v -i warn | tee -a "$OUT/inv16_plans.log"
  done
  timeout 100 python3 scripts/tune_linalg.py --only "inv 8x8 100K" --seconds 90 --plans "[(4, 1, 1, False, False),
    (4, 1, 1, False), (4, 1, 1, False, False), (4, 1, 1, False), (2, 1, 1, False), (4, 1, 2, False)]" \
    2>&1 | grep -v -i warn | tee -a "$OUT/inv16_plans.log" ;;
124)  # fifty-seventh session: GROUP_LOOPS as one loop with the rows' groups rotated (offline: the same
  # instructions a step as the copied loops, a third of the compile time); 16x16 plans float32 (4, 1, 1),
  # complex64 (8, 2, 1): plans against the earlier defaults, first calls with an empty Triton cache (the
  # compile) and speed against torch, inverse and solve, n = 8, 12, 16; the compiled tests; the bench's inv
  # rows (records)
  export TRITON_CACHE_DIR; TRITON_CACHE_DIR=$(mktemp -d)
  timeout 200 python3 scripts/tune_linalg.py --only "inv 16x16 100K" --seconds 190 --plans "[(4, 1, 1, False),
    (8, 2, 1, False), (8, 2, 2, False), (4, 1, 2, False)]" 2>&1 | grep -v -i warn | tee -a "$OUT/inv16_plans.log"
  timeout 200 python3 scripts/tune_linalg.py --only "inv 16x16 c64" --seconds 190 --plans "[(8, 2, 1, False),
    (8, 1, 1, False), (16, 1, 1, False), (16, 1, 2, False)]" 2>&1 | grep -v -i warn | tee -a "$OUT/inv16_plans.log"
  TRITON_CACHE_DIR=$(mktemp -d)
  timeout 300 python3 scripts/small_first_calls.py --ns 8,16 2>&1 | grep -v -i warn \
    | tee "$OUT/small_first_calls.log"
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_small.py 2>&1 | tail -2 | tee "$OUT/small_tests.log"
  timeout 150 python3 -m fastpath.bench linalg --only "inv " --graphs --json "$OUT/inv_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " ;;
125)  # (its defaults run as 130 in the fifty-eighth session; the plans before, not rerun) fifty-seventh session, for the next: the solves' own 16x16 plans (small.SOLVE_PLANS, 96185ab; not timed: no
  # machine could be started; offline sm_90 a step per system 102.5 -> 98 instructions float32, 527 -> 411 complex64,
  # barriers 96 -> 0) against the inverses' plans and the plans before: first calls with an empty cache, speed
  for p in "" "ops.linalg.small.SOLVE_PLANS:16=(4, 1, 1)" "ops.linalg.small.SOLVE_PLANS:16=(8, 2, 2);ops.linalg.small.GROUP_LOOPS=False"; do
    echo "== ${p:-defaults}"; TRITON_CACHE_DIR=$(mktemp -d) timeout 200 python3 -c "
import runpy, sys
from fastpath.bench.__main__ import apply_knobs
apply_knobs([kv for kv in '$p'.split(';') if kv])
sys.argv = ['small_first_calls.py', '--ns', '16']
runpy.run_path('scripts/small_first_calls.py', run_name='__main__')" 2>&1 | grep -v -i warn | grep solve
  done 2>&1 | tee "$OUT/solve_plans.log" ;;
126)  # (waits: no H200 in the fifty-eighth session) fifty-eighth session: issue 8's table on the GPU at hand (an H200 is the issue's): every linalg row,
  # graphs too, with an empty Triton cache's compiles inside the 540 s (records); on an H100, 125 then 120
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    timeout 560 python3 -m fastpath.bench linalg --graphs --json "$OUT/linalg_records.jsonl" 2>&1 | grep -v -i warn \
      | grep "linalg " | tee "$OUT/linalg_table.log"
  else
    bash "$0" 125; bash "$0" 120
  fi ;;
127)  # (run in the fifty-eighth session at 83f28bf: CHAIN_TF32 lost accuracy, 3.8e-7 -> 5.9e-6, and is gone; EVEN_TILES
  # kept; STAGES 2 and KB 32 slower) fifty-eighth session: the blocked sweep's chunk products chained into the accumulator (triangular.CHAIN_TF32)
  # and its full tiles without masks (EVEN_TILES); offline sm_90, complex64 256 right-hand sides, the chunk loop
  # (L pass) 1124 -> 878 -> 552 instructions, registers 233 -> 255 -> 204; then pipelining and right-hand sides a
  # program re-measured (STAGES 2: the chunk loop's loads become asynchronous copies; KB 32): lu_solve of
  # 64 x 256x256, twice alternated; the compiled lu tests at the defaults
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py -k "solve or tf32" 2>&1 | tail -2 \
    | tee "$OUT/lu_tests.log"
  T=ops.linalg.triangular
  for round in 1 2; do
    for v in "$T.CHAIN_TF32=False;$T.EVEN_TILES=False" "$T.EVEN_TILES=False" "" "$T.STAGES=2" \
        "$T.BLOCKED_PLAN:complex64=(32, 32, 32, 4)"; do
      echo "== ${v:-defaults}"; sets=(); IFS=';' read -ra kv <<< "$v"; for x in "${kv[@]}"; do sets+=(--set "$x"); done
      timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 64,128,256 "${sets[@]}" 2>&1 \
        | grep -v -i warn | grep "k="
    done
  done 2>&1 | tee "$OUT/sweep_chain.log" ;;
128)  # (run in the fifty-eighth session at b210b76: EVEN_TILES 366 -> 349 us, OWN_TF32X3 -> 332, HOIST_OFFSETS no
  # change and gone) fifty-eighth session: the blocked sweep's tf32x3 products split by fastpath (triangular.OWN_TF32X3: no NaN
  # fixup, no zero accumulator's sum; offline sm_90 complex64 256 right-hand sides, with EVEN_TILES, the chunk loop
  # 808 -> 590 instructions (L pass), 196 -> 218 registers) against Triton's, EVEN_TILES off / on (127: 355 -> 336 us
  # with the chained products), HOIST_OFFSETS off / on (the U pass's chunk loop 660 -> 562); lu_solve of 64 x 256x256 twice alternated, the compiled lu tests, the bench's lu_solve
  # and solve_triangular rows (records)
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py -k "solve or tf32" 2>&1 | tail -2 \
    | tee "$OUT/lu_tests.log"
  T=ops.linalg.triangular
  for round in 1 2; do
    for v in "$T.OWN_TF32X3=False;$T.EVEN_TILES=False;$T.HOIST_OFFSETS=False" "$T.OWN_TF32X3=False;$T.HOIST_OFFSETS=False" \
        "$T.HOIST_OFFSETS=False" ""; do
      echo "== ${v:-defaults}"; sets=(); IFS=';' read -ra kv <<< "$v"; for x in "${kv[@]}"; do sets+=(--set "$x"); done
      timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 64,256 "${sets[@]}" 2>&1 \
        | grep -v -i warn | grep "k="
    done
  done 2>&1 | tee "$OUT/sweep_split.log"
  timeout 150 python3 -m fastpath.bench linalg --only "lu_solve" --graphs --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg "
  timeout 100 python3 -m fastpath.bench linalg --only "solve_triangular" --graphs --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " ;;
129)  # (run in the fifty-eighth session at 971af99: no change, 44-45 us either way; DIAG_AHEAD gone) fifty-eighth session: the diagonal-block inverses with two of M's columns in flight (triangular.DIAG_AHEAD 1 -> 2;
  # 45.0 of lu_solve's 332 us at 256 right-hand sides; offline sm_90 +2 registers, +5-7 instructions a step):
  # kernel times, alternated twice; the compiled lu tests; the bench's lu_solve rows (records)
  for round in 1 2; do for a in 1 2; do
    echo "== DIAG_AHEAD=$a"
    timeout 40 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 1,256 --profile \
      --set ops.linalg.triangular.DIAG_AHEAD=$a 2>&1 | grep -v -i warn | grep "k=\|_kernel"
  done; done 2>&1 | tee "$OUT/diag_ahead.log"
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py -k "solve or tf32 or diag" 2>&1 \
    | tail -1 | tee "$OUT/lu_tests.log"
  timeout 100 python3 -m fastpath.bench linalg --only "lu_solve" --graphs --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " ;;
130)  # (run in the fifty-eighth session at e8a28d8: float32 7.6 s / 2.86x, complex64 14.4 s / 2.02x) fifty-eighth session: 125 at the defaults only (the solves' own 16x16 plans, never timed): first calls with an
  # empty Triton cache and speed against torch, float32 and complex64 (the fifty-seventh session at the inverses'
  # plans: compiles 29 s / 58 s, 2.80x / 1.61x torch)
  TRITON_CACHE_DIR=$(mktemp -d) timeout 250 python3 scripts/small_first_calls.py --ns 16 2>&1 | grep -v -i warn \
    | tee "$OUT/solve_plans.log" ;;
131)  # (run in the fifty-ninth session at fb19ab3: the NCHW rows failed to compile, _out's default string;
  # the phases in 132's comment, ROWS_EVICT -1.8 us on 2-D) fifty-ninth session: batch_norm's grid-wide rows plan
  # (2-D fp32 1.22x on the H200, target 1.3x): its phases timed apart (three launches, ROWS_PHASES) and L2 eviction policies (ROWS_EVICT: the reduce's loads kept, the
  # normalise's loads and stores streamed), then the bench's batch_norm rows with ROWS_EVICT off / on, twice
  timeout 170 python3 scripts/tune_batch_norm.py --only 2d_fp32 nhwc_bf16 --phases --budget 160 2>&1 \
    | grep -v -i warn | tee "$OUT/tune_bn.log"
  for round in 1 2; do for v in False True; do
    timeout 100 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs \
      --set ops.batch_norm_kernel.ROWS_EVICT=$v 2>&1 | grep -v -i warn | grep "training " \
      | sed "s/^/ROWS_EVICT=$v /" | tee -a "$OUT/bn_evict.log"
  done; done ;;
132)  # (run in the fifty-ninth session at 51b883f with PLAN="ROWS_PER_SM=2 ROWS_WARPS=4 ROWS_EVICT=True": 2-D
  # 103.6 -> 110.3 us, slower; ROWS_PER_SM is gone) fifty-ninth session: 131's phases put the time in the reduce (2-D fp32 forward 18.1 us for 33.5 MB, ~1.85
  # TB/s; backward 30.9 for 67 MB) and the barriers at ~0 (three launches 37.9 us, one 37.6): programs a
  # multiprocessor (ROWS_PER_SM) with fewer warps each, then the bench's rows at PLAN against the defaults, twice
  timeout 200 python3 scripts/tune_batch_norm.py --only 2d_fp32 nhwc_bf16 --phases --budget 190 2>&1 \
    | grep -v -i warn | tee "$OUT/tune_bn.log"
  for round in 1 2; do for v in "" "${PLAN:-}"; do
    timeout 100 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs \
      $(for kv in $v; do echo "--set ops.batch_norm_kernel.$kv"; done) 2>&1 | grep -v -i warn | grep "training " \
      | sed "s/^/plan ${v:-defaults} /" | tee -a "$OUT/bn_plan.log"
  done; done ;;
133)  # (its plan run as 135 in the fifty-ninth session; BLOCKED_MAXNREG is gone) fifty-ninth session: complex64 lu_solve's blocked sweep at 32 right-hand sides a program with its registers
  # capped at 128 (triangular.BLOCKED_MAXNREG; offline sm_90 156 -> 128 registers, no spills): four programs a
  # multiprocessor, 512 programs in one wave (uncapped: three, two waves; 64 a program: 218 registers, two, 256
  # programs); lu_solve of 64 x 256x256, 64-256 right-hand sides, twice alternated, then the kernel times
  T=ops.linalg.triangular
  for round in $(seq "${ROUNDS:-2}"); do
    for v in "" "$T.BLOCKED_PLAN:complex64=(32, 32, 32, 4);$T.BLOCKED_MAXNREG:complex64={32: 128}" \
        "$T.BLOCKED_PLAN:complex64=(32, 32, 32, 4)"; do
      echo "== ${v:-defaults}"; sets=(); IFS=';' read -ra kv <<< "$v"; for x in "${kv[@]}"; do sets+=(--set "$x"); done
      timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 64,128,256 "${sets[@]}" 2>&1 \
        | grep -v -i warn | grep "k="
    done
  done 2>&1 | tee "$OUT/sweep_cap.log"
  timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile \
    --set "$T.BLOCKED_PLAN:complex64=(32, 32, 32, 4)" --set "$T.BLOCKED_MAXNREG:complex64={32: 128}" 2>&1 \
    | grep -v -i warn | tee "$OUT/sweep_cap_profile.log" ;;
134)  # (run in the fifty-ninth session at 0b683fc, ONLY=batch_norm: 32 MiB 18.6 us, 64 MiB 32.7 us) fifty-ninth session: the floor of batch_norm 2-D's reduce phases (a bare cold read of 33.5 / 67 MB, as
  # x alone and x with g), then the training bench's records (ROWS_EVICT on; ONLY: the cases named so)
  timeout 120 python3 scripts/read_bandwidth.py 32 64 2>&1 | grep -v -i warn | tee "$OUT/read_bw.log"
  timeout 400 python3 -m fastpath.bench training --only "${ONLY:-}" --graphs --json "$OUT/training_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "training " | tee "$OUT/training_table.log" ;;
135)  # (run in the fifty-ninth session at 0b683fc: 256 right-hand sides 330 -> 414 us, slower; reverted) fifty-ninth session: 133 as the default on trial (complex64's blocked sweep at 32 right-hand sides a program,
  # registers capped at 128: four programs a multiprocessor): against the plan before, twice alternated; the kernel
  # times; the bench's lu_solve rows (records); then 134 with ONLY
  T=ops.linalg.triangular
  for round in 1 2; do
    for v in "" "$T.BLOCKED_PLAN:complex64=(32, 32, 64, 4)"; do
      echo "== ${v:-defaults}"; sets=(); IFS=';' read -ra kv <<< "$v"; for x in "${kv[@]}"; do sets+=(--set "$x"); done
      timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 64,128,256 "${sets[@]}" 2>&1 \
        | grep -v -i warn | grep "k="
    done
  done 2>&1 | tee "$OUT/sweep_cap.log"
  timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile 2>&1 | grep -v -i warn \
    | tee "$OUT/sweep_cap_profile.log"
  timeout 150 python3 -m fastpath.bench linalg --only lu_solve --graphs --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " | tee "$OUT/lu_table.log"
  bash "$0" 134 ;;
136)  # (run in the sixtieth session at b35e31c: 256 right-hand sides 333.3 / 330.3 -> 395.3 / 399.4 us, slower; removed)
  # fifty-ninth session, for the next: complex64 lu_solve's word-tile sweep with its products transposed
  # (triangular.XW_TRANS, off: X^T M^T, M's tiles the MMA operand read from shared memory; offline sm_90 a chunk
  # step 590 -> 477 instructions, shared-memory loads 64 -> 8, a block's end 762 -> 916, 218 -> 255 registers):
  # the compiled word-tile tests, then 64 x 256x256 at 64-256 right-hand sides off / on, twice alternated, the
  # kernel times at on
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py -k "word_tiles or tf32" 2>&1 \
    | tail -2 | tee "$OUT/lu_tests.log"
  for round in 1 2; do for v in False True; do
    echo "== XW_TRANS=$v"
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 64,128,256 \
      --set "ops.linalg.triangular.XW_TRANS=$v" 2>&1 | grep -v -i warn | grep "k="
  done; done 2>&1 | tee "$OUT/xw_trans.log"
  timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile \
    --set "ops.linalg.triangular.XW_TRANS=True" 2>&1 | grep -v -i warn | tee "$OUT/xw_trans_profile.log" ;;
137)  # (run in the sixtieth session at f11d391: inverses 43.8 -> 41.7 us, float32 35.2 -> 34.3; lu_solve c64 2.87 -> 2.90x)
  # sixtieth session: the diagonal-block inverses' steps as a unit triangle's (no select, no division a step;
  # M^-1 = V^-1 D^-1, V = D^-1 M): the compiled solve tests, then lu_solve at BASE (the base commit's src tree)
  # and at this one alternated twice, kernel times of each at 256 right-hand sides; the lu rows' records
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py \
    -k "diag_inverse or test_lu_solve or test_solve_triangular" 2>&1 | tail -3 | tee "$OUT/tests.log"
  for round in 1 2; do for src in "$BASE" "$PWD/src"; do
    echo "== $src"
    PYTHONPATH=$src timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 1,64,256 2>&1 \
      | grep -v -i warn | grep "k="
  done; done 2>&1 | tee "$OUT/diag_unit.log"
  for src in "$BASE" "$PWD/src"; do
    PYTHONPATH=$src timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 256 --profile 2>&1 \
      | grep -v -i warn
  done 2>&1 | tee "$OUT/diag_unit_profile.log"
  timeout 200 python3 -m fastpath.bench linalg --only "lu_" --graphs --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " | tee "$OUT/lu_table.log" ;;
138)  # (run in the sixtieth session at 1c0e8e0 on an H200: float32 form 3 34.0 / 34.5 -> 28.0 / 27.9 us, made its
  # default; complex64 form 3 slower, 37.2 / 36.8 -> 40.7 / 40.9; ncu: the inverses L2-bound, the sweep L1/TEX-bound)
  # sixtieth session: the diagonal-block inverses with the block loaded first (DIAG_PLAN form 3: its lines
  # cached before the steps' column loads), against form 2, and form 2 at half the programs (16 columns or two
  # blocks a program), kernel times at 256 right-hand sides, twice alternated
  for round in 1 2; do
    for plan in "complex64=(2,1,1,8)" "complex64=(3,1,1,8)" "complex64=(2,1,1,16)" "complex64=(2,1,2,8)" \
        "float32=(2,1,1,16)" "float32=(3,1,1,16)"; do
      echo "== $plan"
      timeout 60 python3 scripts/lu_solve_rhs.py --dtypes "${plan%%=*}" --ks 256 --profile --plan "DIAG_PLAN:$plan" \
        2>&1 | grep -v -i warn | grep -v "^#"
    done
  done 2>&1 | tee "$OUT/diag_pre.log"
  # where the inverses' and the sweep's time goes: ncu's warp states (stall reasons), issue and occupancy, one launch each
  timeout 200 ncu --clock-control none -k "regex:_diag_inv_kernel|_trsm_kernel" -c 2 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 2>&1 \
    | grep -v -i warn | tee "$OUT/diag_ncu.log" | tail -150 ;;
139)  # (not run: 142 took its place, sixty-first session) sixtieth session, for the next: complex64's diagonal-block inverses moving (re, im) word pairs
  # (triangular.DIAG_WORDS, off: a step's column one 8-byte load a lane, the inverses' rows stored as 16-byte
  # runs, where ncu found the (re, im) stores' 2.1 M partial L2 sectors for 8 MB): off / on twice alternated,
  # kernel times at 256 right-hand sides, then lu_solve at 1, 64, 256 right-hand sides each way; the compiled test
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py -k "word_pairs or tf32" 2>&1 \
    | tail -1 | tee "$OUT/words_test.log"
  # and the sweep's low parts formed before its first product (triangular.TF32X3_EARLY, off: offline 218 -> 168
  # registers, a chunk step's barriers 4 -> 2, the same bits), off / on twice, kernel times
  for round in 1 2; do for v in False True; do
    echo "== TF32X3_EARLY=$v"
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64,float32 --ks 256 --profile \
      --set "ops.linalg.triangular.TF32X3_EARLY=$v" 2>&1 | grep -v -i warn | grep -v "^#"
  done; done 2>&1 | tee "$OUT/tf32_early.log"
  for round in 1 2; do for v in False True; do
    echo "== DIAG_WORDS=$v"
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile \
      --set "ops.linalg.triangular.DIAG_WORDS=$v" 2>&1 | grep -v -i warn | grep -v "^#"
  done; done 2>&1 | tee "$OUT/diag_words.log"
  for v in False True; do
    echo "== DIAG_WORDS=$v"
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 1,64,256 \
      --set "ops.linalg.triangular.DIAG_WORDS=$v" 2>&1 | grep -v -i warn | grep "k="
  done 2>&1 | tee -a "$OUT/diag_words.log"
  # the bench's lu_solve rows with both on (records name the knob in their command; keep them if it becomes the default)
  timeout 120 python3 -m fastpath.bench linalg --only "lu_solve" --graphs --set "ops.linalg.triangular.DIAG_WORDS=True" \
    --set "ops.linalg.triangular.TF32X3_EARLY=True" --json "$OUT/lu_words_records.jsonl" 2>&1 | grep -v -i warn | grep "linalg " | tee "$OUT/lu_words_table.log" ;;
140)  # (not run: 142 took its (32,32,128,4) plan) sixty-first session: complex64's sweep at 128 right-hand sides a program, 8 warps (two warpgroups share M's
  # chunk: offline 255 / 250 registers, a chunk step 583 / 567 instructions for 2x the columns of the 4-warp
  # plan's 584), one program an SM; and 4 warps at 128 (one warpgroup, wgmma N = 128: offline 255 / 250 registers,
  # 788 / 780 a chunk step for 2x the columns); with TF32X3_EARLY off / on; kernel times at 256 right-hand sides
  for round in 1 2; do for e in False True; do for plan in "(32,32,64,4)" "(32,32,128,8)" "(32,32,128,4)"; do
    echo "== TF32X3_EARLY=$e plan=$plan"
    timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile \
      --set "ops.linalg.triangular.TF32X3_EARLY=$e" --plan "BLOCKED_PLAN:complex64=$plan" 2>&1 | grep -v -i warn | grep -v "^#"
  done; done; done 2>&1 | tee "$OUT/plan128.log" ;;
141)  # (not run: 142 took its place; TF32X3_EARLY and SWEEP_PDL are gone) sixty-first session, 139 + 140 trimmed to one short call (device time left ~650 s after failed starts), in
  # the order they matter, each part skipped once $SECONDS passes its deadline: DIAG_WORDS off / on twice; then on,
  # TF32X3_EARLY, then SWEEP_PDL added (the sweep a programmatic dependent launch of the inverses: the row map
  # tracked before its wait), each twice; the 128-column plans with all three; the compiled tests; the bench rows
  rhs() { timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile "$@" 2>&1 | grep -v -i warn | grep -v "^#"; }
  T=ops.linalg.triangular; W="--set $T.DIAG_WORDS=True"; E="--set $T.TF32X3_EARLY=True"; D="--set $T.SWEEP_PDL=True"
  for round in 1 2; do for v in False True; do
    echo "== DIAG_WORDS=$v"; rhs --set "$T.DIAG_WORDS=$v"
  done; done 2>&1 | tee "$OUT/diag_words.log"
  for round in 1 2; do
    [ $SECONDS -lt 230 ] && { echo "== WORDS + EARLY"; rhs $W $E; echo "== WORDS + EARLY + PDL"; rhs $W $E $D; }
  done 2>&1 | tee "$OUT/early_pdl.log"
  for plan in "(32,32,128,4)" "(32,32,128,8)"; do
    [ $SECONDS -lt 280 ] && { echo "== WORDS + EARLY + PDL, plan=$plan"; rhs $W $E $D --plan "BLOCKED_PLAN:complex64=$plan"; }
  done 2>&1 | tee "$OUT/plan128.log"
  [ $SECONDS -lt 320 ] && timeout 100 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py \
    -k "word_pairs or tf32 or pdl" 2>&1 | tail -1 | tee "$OUT/words_test.log"
  [ $SECONDS -lt 380 ] && timeout 110 python3 -m fastpath.bench linalg --only "lu_solve" --graphs $W $E $D \
    --json "$OUT/lu_words_records.jsonl" 2>&1 | grep -v -i warn | grep "linalg " | tee "$OUT/lu_words_table.log" ;;
142)  # (run in the sixty-first session at cb0e4ee on an H100: DIAG_WORDS inverses 41.6 -> 14.0 us, lu_solve
  # 2.87x -> 3.18x, made the default; TF32X3_EARLY sweep +4 us and SWEEP_PDL +0, both removed; (32,32,128,4) sweep
  # 302 us against 288, slower) 141 reordered for ~300 s of device time (failed starts took the rest): each setting once, then again
  rhs() { timeout 60 python3 scripts/lu_solve_rhs.py --dtypes complex64 --ks 256 --profile "$@" 2>&1 | grep -v -i warn | grep -v "^#"; }
  T=ops.linalg.triangular; W="--set $T.DIAG_WORDS=True"; E="--set $T.TF32X3_EARLY=True"; D="--set $T.SWEEP_PDL=True"
  for round in 1 2; do
    [ $SECONDS -lt 150 ] && { echo "== base"; rhs; echo "== WORDS"; rhs $W; echo "== WORDS + EARLY"; rhs $W $E;
      echo "== WORDS + EARLY + PDL"; rhs $W $E $D; }
  done 2>&1 | tee "$OUT/knobs.log"
  [ $SECONDS -lt 200 ] && timeout 100 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py \
    -k "word_pairs or tf32 or pdl" 2>&1 | tail -1 | tee "$OUT/words_test.log"
  [ $SECONDS -lt 260 ] && { echo "== WORDS + EARLY + PDL, plan=(32,32,128,4)"; rhs $W $E $D \
    --plan "BLOCKED_PLAN:complex64=(32,32,128,4)"; } 2>&1 | tee "$OUT/plan128.log"
  [ $SECONDS -lt 280 ] && timeout 110 python3 -m fastpath.bench linalg --only "lu_solve" --graphs $W $E $D \
    --json "$OUT/lu_words_records.jsonl" 2>&1 | grep -v -i warn | grep "linalg " | tee "$OUT/lu_words_table.log" ;;
143)  # sixty-first session, for the next (an H200 if one comes): the issue's whole linalg table at the defaults
  # (DIAG_WORDS on since 151ab36: complex64 lu_solve 3.14-3.18x on the H100, 2.83x on the H200 before), then the
  # compiled LU / triangular tests (the last call's ran out of time) as 144, a call of its own (the table with an
  # empty Triton cache's compiles took most of 560 s in the fifty-eighth session's plan)
  timeout 560 python3 -m fastpath.bench linalg --graphs --json "$OUT/linalg_records.jsonl" 2>&1 | grep -v -i warn \
    | grep "linalg " | tee "$OUT/linalg_table.log" ;;
144)  # the compiled LU / triangular tests (143's second call)
  timeout 560 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py 2>&1 | tail -3 | tee "$OUT/lu_tests.log" ;;
145)  # (run in the sixty-second session at b4b4b7b on an H100: the inverses up front with host blocks of 512 rows,
  # 963 -> 442 us in a graph, 1001 -> 613 eager; made the only form, HOST_FORM gone; its variants since take knob_ab.py's
  # module-qualified form) sixty-second session: solve_triangular's host path, the diagonal blocks' inverses up front ("inverse") against
  # the kernel on each block in turn ("sweep"), host blocks of 128-512 rows; the benchmark's row at the default (512);
  # the compiled triangular tests if time is left (device time short after failed starts: ~250 s)
  timeout 150 python3 scripts/solve_tri_host.py --variant "sweep 512:HOST_FORM='sweep'" --variant "inverse 128:HOST_BLOCK=128" \
    --variant "inverse 256:HOST_BLOCK=256" --variant "inverse 512:HOST_BLOCK=512" 2>&1 | grep -v -i warn | tee "$OUT/host_forms.log"
  [ $SECONDS -lt 190 ] && timeout 50 python3 -m fastpath.bench linalg --only "solve_triangular" --graphs \
    --json "$OUT/tri_records.jsonl" 2>&1 | grep -v -i warn | grep "linalg " | tee "$OUT/tri_table.log"
  [ $SECONDS -lt 220 ] && timeout 60 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py \
    -k "solve_triangular" 2>&1 | tail -2 | tee "$OUT/tri_tests.log" ;;
146)  # sixty-second session: where the host path should start (HOST_BLOCK_N, 1024 now: n above it): one matrix of
  # 512 / 1024 / 2048 rows, 512 and 32 right-hand sides, the kernel against the host path; 4 matrices of 1024; the host
  # path against torch at 4096 rows with 1 and 16 right-hand sides (its inversions cost the same whatever k)
  h() { timeout 45 python3 scripts/solve_tri_host.py --rounds 1 "$@" 2>&1 | grep -v -i warn | grep -v "^=="; }
  M=linalg.triangular; K="kernel:$M.HOST_BLOCK_N=4096"; H5="host 512:$M.HOST_BLOCK_N=256"
  H2="host 256:$M.HOST_BLOCK_N=256;$M.HOST_BLOCK=256"
  { h --n 1024 --variant "$K" --variant "$H5" --variant "$H2"; h --n 1024 --k 32 --variant "$K" --variant "$H5";
    h --n 512 --variant "$K" --variant "$H2"; h --n 1024 --batch 4 --variant "$K" --variant "$H5";
    h --n 2048 --variant "$K" --variant "$H5"; h --n 4096 --k 1 --variant "$H5"; h --n 4096 --k 16 --variant "$H5";
  } | tee "$OUT/route.log" ;;
147)  # sixty-third session: torch's large complex64 LU (2048: 0.99-1.00x, torch's path) under each linalg library
  # (cuSOLVER is torch's default for one matrix; MAGMA's getrf factors its panels on the host), 1024-4096 rows,
  # float32 beside; then, on an H200 only, 143's table (the issue's GPU; the H100 ran it at 686030b)
  for dt in complex64 float32; do
    timeout 120 python3 scripts/lu_routes.py --dtype $dt --ns 1024,2048,4096 --batches 1,4 --max-elems 2e9 \
      --backends default,cusolver,magma 2>&1 | grep -v -i warn
  done | tee "$OUT/lu_backends.log"
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && bash "$0" 143 ;;
148)  # sixty-third session: solve_triangular's host path from a CUDA graph (by the inputs' addresses) from the
  # second call on, and one matrix above HOST_ONE_N (512) rows from the host: the compiled graph tests (LU, QR, the
  # host path's), then direct against graphs at 4096 rows (512 and 1 right-hand sides), the kernel against the host
  # path at one 1024-row matrix, the benchmark's rows
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py tests/ops/test_linalg_qr.py \
    -k "graph or solve_triangular" 2>&1 | tail -2 | tee "$OUT/graph_tests.log"
  h() { timeout 60 python3 scripts/solve_tri_host.py "$@" 2>&1 | grep -v -i warn; }
  M=linalg.triangular
  { h --variant "direct:$M.GRAPHS=0" --variant "graphs:$M.GRAPHS=2"
    h --k 1 --rounds 1 --variant "direct:$M.GRAPHS=0" --variant "graphs:$M.GRAPHS=2"
    h --n 1024 --rounds 1 --variant "kernel:$M.HOST_ONE_N=4096" --variant "host:$M.HOST_ONE_N=512"
  } | tee "$OUT/host_graphs.log"
  timeout 60 python3 -m fastpath.bench linalg --only "solve_triangular" --graphs --json "$OUT/tri_records.jsonl" \
    2>&1 | grep -v -i warn | grep "linalg " | tee "$OUT/tri_table.log" ;;
149)  # sixty-third session: 147 found torch's batched LU of 1024-2048 rows (MAGMA, its default from two matrices)
  # 1.6-1.85x slower than cuSOLVER's looped getrf: where batches of torch's path should go a matrix at a time
  # (from 73bffc7 "ours" loops from lu.LOOP_MIN_N = 1024 rows); then, on an H200 only, 143's table
  timeout 60 python3 -m fastpath.bench linalg --only "lu_factor complex64 2048" --json "$OUT/lu_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " | tee "$OUT/lu_table.log"
  for dt in complex64 float32; do
    timeout 70 python3 scripts/lu_routes.py --dtype $dt --ns 1024,2048,512 --batches 2,16 --max-elems 2.2e9 \
      --backends default,cusolver 2>&1 | grep -v -i warn
  done | tee "$OUT/lu_loop.log" ;;
150)  # sixty-third session, for the next: solve_ex of 2-4 large systems through the LU loop (5ae7dc3; the last three
  # shapes of solve_shapes.py) against torch's solve_ex, every shape once; then 143 on an H200
  timeout 200 python3 scripts/solve_shapes.py 2>&1 | grep -v -i warn | tee "$OUT/solve_shapes.log"
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && bash "$0" 143 ;;
151)  # (run at 9a0e863 on an H100: the solve_ex shapes, log ...-s64-solve_shapes-9a0e863-h100.log) sixty-fourth
  # session: on an H200, 143 (the issue's table: its GPU); on an H100, 150's solve_ex shapes
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash "$0" 143
  else timeout 200 python3 scripts/solve_shapes.py 2>&1 | grep -v -i warn | tee "$OUT/solve_shapes.log"; fi ;;
152)  # sixty-fourth session: on an H200 first 143 (the issue's table, its GPU); then the graph tests (LU, QR, the
  # triangular host path and the graph cache's dropped keys, GraphCache.DROPPED_WAIT), then the cache's test with
  # DROPPED_WAIT = 0 (the old behaviour: it must fail)
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
    && timeout 480 python3 -m fastpath.bench linalg --graphs --json "$OUT/linalg_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "linalg " | tee "$OUT/linalg_table.log"
  G=src/fastpath/ops/linalg/graphs.py
  { echo "== DROPPED_WAIT = 8"
    timeout $((585 - SECONDS)) python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py \
      tests/ops/test_linalg_qr.py -k "graph" 2>&1 | tail -3
    cp $G /tmp/graphs.py; sed -i 's/DROPPED_WAIT = 8/DROPPED_WAIT = 0/' $G; echo "== DROPPED_WAIT = 0 (must fail)"
    timeout 30 python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py -k "graph_cache" 2>&1 | tail -3
    cp /tmp/graphs.py $G; } | tee "$OUT/graph_cache.log" ;;
153)  # sixty-fourth session: lu_factor on torch's route calls torch's lu_factor itself (152 on the H200 at 0db300c:
  # one 2048x2048 complex64 0.99x, 5590.0 against 5552.1 us, through _factor_ex + our own zero-pivot check): the
  # bench row three times, then the LU route / singular tests compiled
  for r in 1 2 3; do timeout 60 python3 -m fastpath.bench linalg --only "lu_factor complex64 2048" \
    --json "$OUT/lu2048_records.jsonl" 2>&1 | grep -v -i warn | grep "linalg "; done | tee "$OUT/lu2048.log"
  timeout $((580 - SECONDS)) python3 -m pytest -q -p no:cacheprovider tests/ops/test_linalg_lu.py \
    -k "route_by_speed or singular or a_matrix_at_a_time" 2>&1 | tail -2 | tee "$OUT/lu_route_tests.log" ;;
154)  # sixty-fifth session: 153 (pending), then batch_norm 2-D's reduce against other reads of its bytes
  # (scripts/colsum_probe.py: fastpath.linear / torch.sum of 33.6 MB, the reduce's shape with its plan's knobs
  # free), take's floor (gather_floor.py), the phases of today's plan (tune_batch_norm.py --phases); the
  # split-K counts of 14336 -> 4096 at 4 and 16 rows (issue 3's 88% of copy: 87.8 / 86.1%)
  timeout 200 bash "$0" 153
  timeout 170 python3 scripts/colsum_probe.py 2>&1 | grep -v -i warn | tee "$OUT/colsum_probe.log"
  timeout 60 python3 scripts/gather_floor.py 2>&1 | grep -v -i warn | tee "$OUT/gather_floor.log"
  timeout $((480 - SECONDS)) python3 scripts/tune_batch_norm.py --only 2d_fp32 --phases --workers 4 2>&1 \
    | grep -v -i warn | tee "$OUT/tune_bn_2d.log"
  for r in 4 16; do timeout $((590 - SECONDS)) python3 scripts/split_probe.py --rows $r --splits 1,2,3,4,6,8 \
    --shapes 14336x4096x0x0 2>&1 | grep -v -i warn; done | tee "$OUT/split_14336.log" ;;
155)  # (ran at ff48da2 on an H100; ROWS_FULL timed the same and was removed since: its A/B no longer runs) sixty-fifth
  # session: batch_norm's grid-wide plan with its pipelined loops over whole tiles (ROWS_FULL, new
  # default; 2-D's forward reduce ran at 18.2 us on the H100 where colsum_probe read its bytes in 12.7): the bench's
  # batch_norm rows alternated twice, the phases, take's rows (random, sorted, contiguous indices), then the
  # forward reduce's features one at a time (colsum_probe --features), each while time is left
  for r in 1 2; do for v in False True; do echo "== ROWS_FULL=$v"
    timeout 100 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs \
      --set ops.batch_norm_kernel.ROWS_FULL=$v --json "$OUT/bn_full_$v.jsonl" 2>&1 | grep -v -i warn \
      | grep "training "; done; done | tee "$OUT/bn_full_ab.log"
  [ $SECONDS -lt 250 ] && timeout $((330 - SECONDS)) python3 scripts/tune_batch_norm.py --only 2d_fp32 nhwc_bf16 \
    --phases --workers 8 2>&1 | grep -v -i warn | grep -v run_backward | tee "$OUT/tune_bn_full.log"
  [ $SECONDS -lt 320 ] && timeout $((380 - SECONDS)) python3 -m fastpath.bench elementwise --only take --graphs \
    --json "$OUT/take_records.jsonl" 2>&1 | grep -v -i warn | grep "elementwise " | tee "$OUT/take.log"
  [ $SECONDS -lt 330 ] && timeout $((390 - SECONDS)) python3 scripts/colsum_probe.py --features 2>&1 \
    | grep -v -i warn | tee "$OUT/bn_features.log" ;;
156)  # sixty-fifth session: batch_norm's grid-wide plan with its partials stored a program's row at a time
  # (ROWS_PART_BY_CHUNK, new default; 155's features probe: the (C, P) stores cost 5.7 us of the forward reduce's
  # 18.1 on the H100): the bench's batch_norm rows alternated, then its compiled large-size tests, the phases
  for r in 1 2; do for v in False True; do echo "== ROWS_PART_BY_CHUNK=$v"
    timeout 90 python3 -m fastpath.bench training --only "batch_norm fwd+bwd" --graphs \
      --set ops.batch_norm_kernel.ROWS_PART_BY_CHUNK=$v --json "$OUT/bn_chunk_$v.jsonl" 2>&1 | grep -v -i warn \
      | grep "training "; done; done | tee "$OUT/bn_chunk_ab.log"
  timeout $((330 - SECONDS)) python3 -m pytest -q -p no:cacheprovider tests/ops/test_batch_norm.py -k large_gpu \
    2>&1 | tail -2 | tee "$OUT/bn_large_tests.log"
  [ $SECONDS -lt 330 ] && timeout $((380 - SECONDS)) python3 scripts/tune_batch_norm.py --only 2d_fp32 nhwc_bf16 \
    --phases --workers 8 2>&1 | grep -v -i warn | grep -v run_backward | tee "$OUT/tune_bn_chunk.log" ;;
157)  # (ran at d1c333c on an H100: 'none' graph 130.2 / 130.6 us default, 130.0 / 129.6 evict-first, 129.5 / 129.6
  # with evict-last too: noise; the knobs were removed) sixty-sixth session: mse_loss's evict-first streams (ops.loss.STREAM_EVICT) and evict-last forward reads
  # (FWD_KEEP), both off ('none' 8192x4096 bf16 1.27x on the H200, 1.3x asked): the bench's mse rows alternated
  # twice, the loss tests compiled with both on; on an H200 then the whole training table (issue 10's records)
  E1="--set ops.loss.STREAM_EVICT=True"
  for r in 1 2; do for v in "" "$E1" "$E1 --set ops.loss.FWD_KEEP=True"; do echo "== ${v:-default}"
    timeout 60 python3 -m fastpath.bench training --only mse_loss --graphs $v 2>&1 | grep -v -i warn \
      | grep "training "; done; done | tee "$OUT/mse_evict_ab.log"
  timeout 120 python3 -c "import sys, pytest, fastpath.ops.loss as L; L.STREAM_EVICT = L.FWD_KEEP = True
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/ops/test_loss.py']))" 2>&1 | tail -2 \
    | tee "$OUT/loss_tests_evict.log"
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
    && timeout $((590 - SECONDS)) python3 -m fastpath.bench training --graphs --json "$OUT/training_records.jsonl" \
    2>&1 | grep -v -i warn | grep "training " | tee "$OUT/training_table.log" ;;
158)  # sixty-sixth session: the whole training table at the final batch_norm plan (partials by chunk), on
  # whichever GPU comes (issue 10's records: the H200's; the H100's rows were from 9b0c5fa)
  timeout 400 python3 -m fastpath.bench training --graphs --json "$OUT/training_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "training " | tee "$OUT/training_table.log" ;;
159)  # sixty-sixth session: on an H200, the training table (158) and the elementwise table (take, frexp,
  # heaviside, the unsigned comparisons: issue 10's other figures); on an H100, nothing more to learn there
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 0; }
  bash "$0" 158
  timeout $((580 - SECONDS)) python3 -m fastpath.bench elementwise --graphs --json "$OUT/elementwise_records.jsonl" \
    2>&1 | grep -v -i warn | grep "elementwise " | tee "$OUT/elementwise_table.log" ;;
160)  # (ran at d46c16f on an H100: 16M values 86.3 / 81.9 -> 82.9 / 78.2 us, 2.80 / 2.91x -> 2.94 / 3.04x; tests
  # 44 passed; the knob is fastpath._core.readback.MODE since) sixty-sixth session: validated bincount's range read back through page-locked words (ops.bincount.READBACK
  # 'pinned', off) against tolist (H100 at 4e374c0: 84.3 us, 2.85x; 3x asked): the bench's bincount rows alternated
  # twice, then the bincount tests compiled with 'pinned'
  for r in 1 2; do for v in tolist pinned; do echo "== READBACK=$v"
    timeout 60 python3 -m fastpath.bench training --only "bincount uniform" --set "ops.bincount.READBACK='$v'" 2>&1 \
      | grep -v -i warn | grep "training "; done; done | tee "$OUT/bincount_readback.log"
  timeout $((500 - SECONDS)) python3 -c "import sys, pytest, fastpath.ops.bincount as B; B.READBACK = 'pinned'
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/ops/test_bincount.py']))" 2>&1 | tail -2 \
    | tee "$OUT/bincount_tests_pinned.log" ;;
161)  # sixty-sixth session, the last call: the validating reads through page-locked words shared by bincount and
  # take (fastpath._core.readback, "pinned" by default; take's one validated row, ~590 us of random gathers, would not
  # show ~4 us): the bincount rows for the records, the tests that read back (compiled; warnings listed)
  timeout 90 python3 -m fastpath.bench training --only bincount --graphs --json "$OUT/bincount_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "training " | tee "$OUT/bincount_table.log"
  timeout $((560 - SECONDS)) python3 -m pytest -q -rw -p no:cacheprovider tests/test_core.py tests/ops/test_bincount.py \
    tests/ops/test_elementwise.py -k "read_back or bincount or take" 2>&1 | tail -12 | tee "$OUT/readback_tests.log"
  R=src/fastpath/_core/readback.py; cp $R /tmp/readback.py; sed -i 's/^    torch.cuda.current_stream(t.device).synchronize()/    pass/' $R
  { echo "== without the wait (must fail)"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_core.py \
    -k read_back 2>&1 | tail -2; } | tee -a "$OUT/readback_tests.log"; cp /tmp/readback.py $R ;;
162)  # sixty-sixth session, found at its end (H100, d005319): tests/ops/test_bincount.py's
  # test_kernel_variants[BLOCK=32-SUM_TILE=(2, 8)] failed 1 run in 5 with tolist reads (and a variant of the same
  # test in 1 of 6 earlier runs, a weighted check); 14 other runs passed. Which check and which bins: the variant
  # 40 times (first failure in full), then every other bincount test 20 times (do the default plans ever fail?)
  for r in $(seq 40); do timeout 30 python3 -m pytest -x -q -p no:cacheprovider tests/ops/test_bincount.py \
    -k "kernel_variants and BLOCK and SUM_TILE" --tb=long > /tmp/bc.log 2>&1 || { echo "run $r failed"; tail -60 /tmp/bc.log; break; }
  done | tee "$OUT/bincount_flake.log"
  for r in $(seq 20); do [ $SECONDS -lt 540 ] && timeout 40 python3 -m pytest -q -p no:cacheprovider \
    tests/ops/test_bincount.py -k "not (BLOCK and SUM_TILE)" 2>&1 | tail -1; done | sort | uniq -c | tee -a "$OUT/bincount_flake.log" ;;
163)  # sixty-seventh session: the bincount flake (162: the hot bin's float32 sum 2.37e-6 off against a 2e-6
  # norm-wise bound, run 5 of 40) now checked per bin against the bound every summation order meets: the variant 60
  # times, the whole file 10 times; then 159 where an H200 came
  for r in $(seq 60); do [ $SECONDS -lt 400 ] && { timeout 30 python3 -m pytest -x -q -n 0 -p no:cacheprovider tests/ops/test_bincount.py \
    -k "kernel_variants and BLOCK and SUM_TILE" > /tmp/bc.log 2>&1 || { echo "run $r failed"; tail -40 /tmp/bc.log; }; }
  done | tee "$OUT/bincount_flake.log"; echo "variant runs done: $SECONDS s" | tee -a "$OUT/bincount_flake.log"
  for r in $(seq 10); do [ $SECONDS -lt 540 ] && timeout 40 python3 -m pytest -q -p no:cacheprovider tests/ops/test_bincount.py 2>&1 | tail -1
  done | sort | uniq -c | tee -a "$OUT/bincount_flake.log"
  bash "$0" 159 ;;
164)  # sixty-seventh session, the last call: what ran on no GPU since last session's end (take's one-word read
  # fe4eeb4, the memo's replay arguments f2c8be3), compiled: the take, memo and read-back tests (warnings listed), then
  # the random sweep compiled (fuzz_ops --cuda: every op against PyTorch, eager calls replaying their launch memos;
  # last compiled in the forty-sixth session) for what time is left
  timeout 150 python3 -m pytest -q -rw -p no:cacheprovider tests/test_core.py tests/ops/test_elementwise.py \
    tests/ops/test_bincount.py -k "take or memo or read_back or bincount" 2>&1 | tail -15 | tee "$OUT/take_memo_tests.log"
  timeout $((380 - SECONDS)) python3 scripts/fuzz_ops.py 67 $((350 - SECONDS)) --cuda 2>&1 | grep -v -i warn | tail -25 \
    | tee "$OUT/fuzz_cuda.log" ;;
165)  # sixty-seventh session (no device time left for it): the default-device fixes compiled (the pinned read's
  # words on the CPU by name: bincount / take raised under torch.set_default_device('cuda')), the tests that hold
  # them, then the compiled random sweep again (fuzz_ops --cuda, float32 causal_conv3d now judged against cuDNN's TF32)
  timeout 200 python3 -m pytest -q -rw -p no:cacheprovider tests/ops/test_default_device.py tests/ops/test_autocast.py \
    tests/ops/test_bincount.py::test_deterministic_mode_as_torch tests/ops/test_autograd_paths.py tests/engine/test_engine.py \
    tests/models/test_hybrid.py -k "default_device or autocast or deterministic or grad" 2>&1 | tail -8 | tee "$OUT/default_device_tests.log"
  timeout $((560 - SECONDS)) python3 scripts/fuzz_ops.py 68 $((530 - SECONDS)) --cuda 2>&1 | grep -v -i warn | tail -25 \
    | tee "$OUT/fuzz_cuda.log" ;;
166)  # sixty-eighth session: issue 3's ceilings: every bf16 linear row and the scaled_mm rows at M <= 16 timed as
  # the bench's graph rows beside the fastest read-only kernel of the same weight bytes (scripts/linear_ceiling.py),
  # then 165's compiled tests
  timeout 330 python3 scripts/linear_ceiling.py --json "$OUT/linear_ceiling.jsonl" 2>&1 | grep -v -i warn \
    | tee "$OUT/linear_ceiling.log"
  timeout $((570 - SECONDS)) python3 -m pytest -q -rw -p no:cacheprovider tests/ops/test_default_device.py \
    tests/ops/test_autocast.py tests/ops/test_bincount.py::test_deterministic_mode_as_torch tests/ops/test_autograd_paths.py \
    tests/engine/test_engine.py tests/models/test_hybrid.py -k "default_device or autocast or deterministic or grad" 2>&1 \
    | tail -8 | tee "$OUT/default_device_tests.log" ;;
167)  # sixty-eighth session: 166's ceilings (on an H100: bf16 ceilings 1.19-1.20x at 1 / 4 / 16 rows, the best read plans at
  # the sweep's edge of 8 programs an SM) with up to 32 programs an SM and 512-word steps, then the compiled random
  # sweep (fuzz_ops --cuda, seed 68) for what time is left
  timeout 300 python3 scripts/linear_ceiling.py --json "$OUT/linear_ceiling.jsonl" 2>&1 | grep -v -i warn \
    | tee "$OUT/linear_ceiling.log"
  timeout $((570 - SECONDS)) python3 scripts/fuzz_ops.py 68 $((540 - SECONDS)) --cuda 2>&1 | grep -v -i warn | tail -25 \
    | tee "$OUT/fuzz_cuda.log" ;;
168)  # sixty-eighth session: on an H200 only (issue 3's figures are the H200's): the ceilings of 167, then 159's tables
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 0; }
  timeout 100 python3 scripts/linear_ceiling.py --json "$OUT/linear_ceiling.jsonl" 2>&1 | grep -v -i warn \
    | tee "$OUT/linear_ceiling.log"
  timeout 330 python3 -m fastpath.bench training --graphs --json "$OUT/training_records.jsonl" 2>&1 \
    | grep -v -i warn | grep "training " | tee "$OUT/training_table.log"
  timeout $((575 - SECONDS)) python3 -m fastpath.bench elementwise --graphs --json "$OUT/elementwise_records.jsonl" \
    2>&1 | grep -v -i warn | grep "elementwise " | tee "$OUT/elementwise_table.log" ;;
169)  # sixty-eighth session, 168 cut to ~4 minutes (the device-seconds left): on an H200 only, issue 3's ceilings
  # and the training table's batch_norm rows (the 2-D row's fix, 1.30x on the H100, never timed there)
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200"; exit 0; }
  timeout 100 python3 scripts/linear_ceiling.py --json "$OUT/linear_ceiling.jsonl" 2>&1 | grep -v -i warn \
    | tee "$OUT/linear_ceiling.log"
  timeout $((240 - SECONDS)) python3 -m fastpath.bench training --only batch_norm --graphs \
    --json "$OUT/training_records.jsonl" 2>&1 | grep -v -i warn | grep "training " | tee "$OUT/training_table.log" ;;
170)  # sixty-ninth session (ops.moe_persistent and scripts/moe_persist_ab.py as at ea1776e, removed after: slower):
  # the one-token experts in one persistent launch: the MoE tests
  # compiled, the one-token layer's variants alternated (scripts/moe_persist_ab.py), then the engine A/B
  timeout 240 python3 -m pytest -q -p no:cacheprovider -n 8 tests/ops/test_moe.py tests/ops/test_norm_fused.py 2>&1 \
    | tail -6 | tee "$OUT/moe_tests.log"
  timeout 150 python3 scripts/moe_persist_ab.py 2>&1 | grep -v -i warn | tee "$OUT/moe_persist_ab.log"
  timeout $((585 - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b,qwen3-30b-a3b:fp8,lfm2.5-8b-a1b:fp8 \
    --layers 16 --rounds 2 --variant "two kernels:moe_persistent.MAX_T=0" --variant "persistent:moe_persistent.MAX_T=1" \
    --json "$OUT/knob_ab.json" 2>&1 | grep -v -i warn | tail -12 | tee "$OUT/knob_ab.log" ;;
171)  # sixty-ninth session: 170 gave the persistent experts kernel 39.0 us (bf16) / 35.2 (fp8) against 15.3 + 9.1 /
  # 10.6 + 8.2 for the two row kernels (H200): its registers, resident programs and gate/up part alone, maxnreg caps
  timeout 300 python3 scripts/moe_persist_ab.py 2>&1 | grep -v -i warn | tee "$OUT/moe_persist_ab.log" ;;
172)  # (the alu decode was removed in the seventieth session after 174 timed it slower: these cases no longer run)
  # sixty-ninth session: fp8 weights decoded on the integer / float32 units ("alu", fp8.bits._decode_e4m3_alu)
  # against the conversion unit ("native") in the one-token MoE row kernels: the exact-decode tests compiled, the
  # FP8 layer row per mode (bench, graphs), ncu of each row kernel once (bf16, native, alu)
  timeout 60 python3 -m pytest -q -p no:cacheprovider -n 4 tests/ops/test_linear.py tests/ops/test_moe.py \
    -k "fp8_every_code or (fp8_experts and rows)" 2>&1 | tail -4 | tee "$OUT/fp8_tests.log"
  for m in None "'alu'"; do
    timeout 55 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --set "ops.moe.FP8_DECODE=$m" \
      --json "$OUT/moe_fp8_modes.jsonl" 2>&1 | grep -v -i warn | grep "fp8 vs" | sed "s/^/$m /"
  done | tee "$OUT/moe_fp8_modes.log"
  timeout 90 ncu --clock-control none -k "regex:_gate_up_rows|_down_rows" -c 6 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 scripts/moe_rows_once.py 2>&1 | grep -v -i warn | tee "$OUT/rows_ncu.log" | tail -40 ;;
173)  # sixty-ninth session: the fp8 row kernels with deeper pipelines (5, 6 stages beside 3, 4; the earlier sweeps
  # stopped at 4; scripts/moe_profile.py --rows-focused), then ncu of each row kernel once (172's)
  FASTPATH_LAUNCH_MEMO=0 timeout 150 python3 scripts/moe_profile.py --rows-focused --dtypes fp8 \
    --json "$OUT/rows_focused.json" 2>&1 | grep -v -i warn | tee "$OUT/rows_focused.log"
  timeout $((235 - SECONDS)) ncu --clock-control none -k "regex:_gate_up_rows|_down_rows" -c 6 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 scripts/moe_rows_once.py 2>&1 | grep -v -i warn | tee "$OUT/rows_ncu.log" | tail -40 ;;
174)  # seventieth session: 172 without its ncu (173 takes the same ncu); run at 91ab736, then the alu decode removed
  timeout 60 python3 -m pytest -q -p no:cacheprovider -n 4 tests/ops/test_linear.py tests/ops/test_moe.py \
    -k "fp8_every_code or (fp8_experts and rows)" 2>&1 | tail -4 | tee "$OUT/fp8_tests.log"
  for m in None "'alu'" None "'alu'"; do
    timeout 55 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --set "ops.moe.FP8_DECODE=$m" \
      --json "$OUT/moe_fp8_modes.jsonl" 2>&1 | grep -v -i warn | grep "fp8 vs" | sed "s/^/$m /"
  done | tee "$OUT/moe_fp8_modes.log" ;;
175)  # (run at 91ab736, when ROWS_TUNED had a 7th entry, the down stages: removed since, 6-tuples)
  # seventieth session: the fp8 rows plan ROWS_FP8 (a 7-tuple of moe_kernels.ROWS_TUNED, e.g. "(16, 256, 8, 1024, 4,
  # 5, 5)") against the default in the engine (16 layers, two rounds) and the FP8 layer bench row under each
  new="moe_kernels.ROWS_TUNED={1: $ROWS_FP8, 2: (16, 256, 8, 1024, 4, 3, 3), 4: (8, 256, 4, 1024, 4, 3, 3)}"
  for v in "" "$new"; do
    timeout 55 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs ${v:+--set "ops.$v"} \
      --json "$OUT/moe_fp8_plan.jsonl" 2>&1 | grep -v -i warn | grep "fp8 vs" | sed "s/^/[${v:-default}] /"
  done | tee "$OUT/moe_fp8_plan.log"
  timeout $((${END_S:-585} - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,lfm2.5-8b-a1b:fp8,qwen3.6-35b-a3b:fp8 \
    --layers 16 --rounds 2 --variant "default:" --variant "plan:$new" \
    --json "$OUT/knob_ab.json" 2>&1 | grep -v -i warn | tail -12 | tee "$OUT/knob_ab.log" ;;
176)  # seventieth session: decode attention's keys a split at the bench's ~776 keys (128 -> 6 splits of 4 KV heads,
  # 24 programs; 64 -> 12; 32 -> 16, MAX_SPLITS): never timed below 128 in the engine (24th session: 128 / 256 / 512)
  timeout $((585 - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b,qwen3-8b,qwen3-30b-a3b:fp8 \
    --layers 16 --rounds 2 --variant "128:attention.MIN_KV_PER_SPLIT=128" --variant "64:attention.MIN_KV_PER_SPLIT=64" \
    --variant "32:attention.MIN_KV_PER_SPLIT=32" \
    --json "$OUT/knob_ab_split.json" 2>&1 | grep -v -i warn | tail -14 | tee "$OUT/knob_ab_split.log" ;;
177)  # (run at 91ab736; 7-tuples as 175)
  # seventieth session: 173's sweep (no ncu), its best fp8 gate/up and down plans taken as ROWS_FP8 into 175's
  # bench row and engine A/B in the same call, then ncu of the row kernels if time is left
  FASTPATH_LAUNCH_MEMO=0 timeout 170 python3 scripts/moe_profile.py --rows-focused --dtypes fp8 \
    --json "$OUT/rows_focused.json" 2>&1 | grep -v -i warn | tee "$OUT/rows_focused.log"
  ROWS_FP8=$(python3 -c "
import json; r = json.load(open('$OUT/rows_focused.json'))['fp8 rows sweep']
f = [x for x in r if isinstance(x[-1], float)]
g = min((x for x in f if x[0] == 'gate/up'), key=lambda x: x[-1]); d = min((x for x in f if x[0] == 'down'), key=lambda x: x[-1])
print((g[1], g[2], d[1], d[2], 4, g[4], d[4]))") || exit 1
  echo "ROWS_FP8=$ROWS_FP8" | tee "$OUT/rows_fp8_choice.log"
  END_S=$((575 - SECONDS)) ROWS_FP8="$ROWS_FP8" bash "$0" 175
  [ $SECONDS -lt 480 ] && timeout $((585 - SECONDS)) ncu --clock-control none -k "regex:_gate_up_rows|_down_rows" -c 6 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 scripts/moe_rows_once.py 2>&1 | grep -v -i warn | tee "$OUT/rows_ncu.log" | tail -40 ;;
178)  # (run at ab12283; DOWN_SLOT_SUM=False is DOWN_SLOT_SUM_STEPS=0 since)
  # seventieth session: the down row kernel's DOWN_TAIL (768 = 512 + 256) and DOWN_SLOT_SUM against the old
  # form (offline sm_90 loop a step, fp8 / bf16: old 394 / 336 instructions, tail 365 / 294, both 366 / 347 at 56
  # registers): compiled tests, the layer bench row by variant, the engine A/B
  timeout 70 python3 -m pytest -q -p no:cacheprovider -n 8 tests/ops/test_moe.py -k "rows or fp8_experts or gpt_oss" \
    2>&1 | tail -3 | tee "$OUT/moe_tests.log"
  for v in "True;True" "True;False" "False;False"; do
    timeout 50 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --set "ops.moe_kernels.DOWN_TAIL=${v%;*}" \
      --set "ops.moe_kernels.DOWN_SLOT_SUM=${v#*;}" 2>&1 | grep -v -i warn | grep "graph" | sed "s/^/[$v] /"
  done | tee "$OUT/moe_down_variants.log"
  timeout $((380 - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,qwen3-30b-a3b,qwen3.6-35b-a3b:fp8 \
    --layers 16 --rounds 2 --variant "both:moe_kernels.DOWN_TAIL=True;moe_kernels.DOWN_SLOT_SUM=True" \
    --variant "tail:moe_kernels.DOWN_TAIL=True;moe_kernels.DOWN_SLOT_SUM=False" \
    --variant "old:moe_kernels.DOWN_TAIL=False;moe_kernels.DOWN_SLOT_SUM=False" \
    --json "$OUT/knob_ab_down.json" 2>&1 | grep -v -i warn | grep decode | tee "$OUT/knob_ab_down.log" ;;
179)  # seventieth session: the down row kernel's slot sum over LFM2.5's two steps of I (1792 = 2 x 1024, the second
  # masked at 768): DOWN_SLOT_SUM_STEPS 2 against 1 in the engine, after the compiled tail tests
  timeout 60 python3 -m pytest -q -p no:cacheprovider -n 8 tests/ops/test_moe.py -k "rows_down_tail" 2>&1 | tail -2 \
    | tee "$OUT/moe_tests.log"
  timeout $((200 - SECONDS)) python3 scripts/knob_ab.py --configs lfm2.5-8b-a1b:fp8,lfm2.5-8b-a1b --layers 16 --rounds 2 \
    --variant "two steps:moe_kernels.DOWN_SLOT_SUM_STEPS=2" --variant "one step:moe_kernels.DOWN_SLOT_SUM_STEPS=1" \
    --json "$OUT/knob_ab_steps.json" 2>&1 | grep -v -i warn | grep decode | tee "$OUT/knob_ab_steps.log" ;;
180)  # (ran at 3b849e4 on an H200; GATE_UP_ROW_SUM holds weight byte sizes since, (1,): set it to (1, 2) / ())
  # seventieth session: the gate/up row kernel's ROW_SUM (each step summed at once; offline sm_90 fp8 / bf16 loop
  # 245 / 250 -> 306 / 357 instructions a step, 120 / 119 -> 64 / 71 registers; the down kernel's slot sum gained at
  # an equal count): compiled tests, the layer bench row each way, the engine A/B
  timeout 60 python3 -m pytest -q -p no:cacheprovider -n 8 tests/ops/test_moe.py -k "row_sum or rows_down_tail" 2>&1 \
    | tail -2 | tee "$OUT/moe_tests.log"
  for v in True False True False; do
    timeout 50 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --set "ops.moe_kernels.GATE_UP_ROW_SUM=$v" \
      2>&1 | grep -v -i warn | grep "graph" | sed "s/^/[$v] /"
  done | tee "$OUT/moe_row_sum.log"
  timeout $((420 - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,qwen3-30b-a3b,lfm2.5-8b-a1b:fp8 \
    --layers 16 --rounds 2 --variant "row sum:moe_kernels.GATE_UP_ROW_SUM=True" \
    --variant "partials:moe_kernels.GATE_UP_ROW_SUM=False" \
    --json "$OUT/knob_ab_row_sum.json" 2>&1 | grep -v -i warn | grep decode | tee "$OUT/knob_ab_row_sum.log" ;;
181)  # seventy-first session, on an H200 only (the issues' figures are the H200's): issue 4's MoE table and the MoE
  # models' decode records with the down row kernel of the seventieth session (dense models unchanged by it)
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: 181 skipped"; exit 0; }
  timeout 170 python3 -m fastpath.bench moe --graphs --json "$OUT/bench.jsonl" 2>&1 | grep -v -i warn \
    | tee "$OUT/moe_table.log" | grep -E "graph" | tail -12
  for cfg in "qwen3-30b-a3b" "qwen3-30b-a3b --fp8" "qwen3.6-35b-a3b" "qwen3.6-35b-a3b --fp8" "lfm2.5-8b-a1b" \
      "lfm2.5-8b-a1b --fp8"; do
    timeout $((570 - SECONDS)) python3 -m fastpath bench-decode --config $cfg --random-weights \
      --json "$OUT/decode.jsonl" 2>&1 | grep "tok/s" | tail -1
  done | tee "$OUT/decode.log" ;;
182)  # seventy-first session: GATE_UP_ROW_SUM on for fp8 weights (180 on the H200 at 3b849e4: Qwen3-30B-A3B FP8
  # +1.2%, bf16 -0.1%, LFM2.5 FP8 0): compiled MoE tests, issue 4's FP8 row, the FP8 decode records (H200 only)
  compiled moe_tests.log 120 8 tests/ops/test_moe.py tests/ops/test_grouped_mm.py
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: records skipped"; exit 0; }
  timeout 60 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | grep graph
  for cfg in "qwen3-30b-a3b --fp8" "qwen3.6-35b-a3b --fp8" "lfm2.5-8b-a1b --fp8"; do
    timeout $((560 - SECONDS)) python3 -m fastpath bench-decode --config $cfg --random-weights \
      --json "$OUT/decode.jsonl" 2>&1 | grep "tok/s" | tail -1
  done | tee "$OUT/decode.log" ;;
183)  # (ran on an H100 at f0b06e1: the default gate/up plan the best, down 16 outputs / 4 stages -1.6%)
  # seventy-first session: the fp8 gate/up row kernel's blocks, warps and stages again now that it sums each step
  # at once (64 registers instead of 120 offline): scripts/moe_profile.py --rows (ROWS_GRID, 70 s a kernel)
  FASTPATH_LAUNCH_MEMO=0 timeout 240 python3 scripts/moe_profile.py --rows --dtypes fp8 --json "$OUT/rows_sweep.json" \
    2>&1 | grep -v -i warn | tee "$OUT/rows_sweep.log" ;;
184)  # (ran on the H200 at dc2897d: FP8 layer 19.47 us, 1.29x; Qwen3-30B-A3B FP8 480.6 tok/s)
  # seventy-first session: 182's records only (its tests passed on an H100 at 5e37da8: 195), for the last seconds
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: records skipped"; exit 0; }
  timeout 50 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs --json "$OUT/bench.jsonl" 2>&1 \
    | grep -v -i warn | grep graph
  for cfg in "qwen3-30b-a3b --fp8" "qwen3.6-35b-a3b --fp8" "lfm2.5-8b-a1b --fp8"; do
    timeout 70 python3 -m fastpath bench-decode --config $cfg --random-weights \
      --json "$OUT/decode.jsonl" 2>&1 | grep "tok/s" | tail -1
  done | tee "$OUT/decode.log" ;;
185)  # (ran on an H100 at f0b06e1: the registers form 5% slower; GATE_UP_AHEAD removed since)
  # seventy-second session: the gate/up row kernel's next step in registers (GATE_UP_AHEAD: no shared memory, no
  # pipeline barrier; offline sm_90 fp8 109 registers, 407 instructions a step with x's layout change through shared
  # memory, 8 warps 69 / 214) against the cp.async pipeline, at 4 and 8 warps: compiled tests, the FP8 layer row
  compiled moe_tests.log 90 8 tests/ops/test_moe.py -k "row_sum"
  w8="ops.moe_kernels.ROWS_TUNED:1=(16, 256, 8, 1024, 8, 3)"
  for r in 1 2; do
    for v in "pipe" "ahead" "ahead w8" "pipe w8"; do
      a=(); [[ $v == ahead* ]] && a+=(--set "ops.moe_kernels.GATE_UP_AHEAD=(1,)"); [[ $v == *w8 ]] && a+=(--set "$w8")
      timeout 50 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs "${a[@]}" 2>&1 | grep -v -i warn \
        | grep "graph" | sed "s/^/[$v] /"
    done
  done | tee "$OUT/moe_ahead.log" ;;
187)  # (ran on the H200 at dc2897d without Qwen3.6 and with 40 s bench runs: d16 lost, -0.7% / -2.1%)
  # seventy-second session: the fp8 row plan with 16 down outputs a program and 4 stages, the best of two H100 sweeps
  # (183 at f0b06e1: down 17.92 against 18.21 us at the default 8 outputs / 3 stages, gate/up at 4 stages 18.26 against
  # 18.22; the seventieth's 17.82 against 18.06): the FP8 layer row each way, then the engine A/B
  d16="ops.moe_kernels.ROWS_TUNED:1=(16, 256, 16, 1024, 4, 4)"
  for v in default d16 default d16; do
    a=(); [[ $v == d16 ]] && a+=(--set "$d16")
    timeout 50 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs "${a[@]}" 2>&1 | grep -v -i warn \
      | grep "graph" | sed "s/^/[$v] /"
  done | tee "$OUT/moe_d16.log"
  timeout $((420 - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8,lfm2.5-8b-a1b:fp8,qwen3.6-35b-a3b:fp8 \
    --layers 16 --rounds 2 \
    --variant "d16:moe_kernels.ROWS_TUNED={1: (16, 256, 16, 1024, 4, 4), 2: (16, 256, 8, 1024, 4, 3), 4: (8, 256, 4, 1024, 4, 3)}" \
    --variant "default:moe_kernels.ROWS_TUNED={1: (16, 256, 8, 1024, 4, 3), 2: (16, 256, 8, 1024, 4, 3), 4: (8, 256, 4, 1024, 4, 3)}" \
    --json "$OUT/knob_ab_d16.json" 2>&1 | grep -v -i warn | grep decode | tee "$OUT/knob_ab_d16.log" ;;
189)  # seventy-second session: the one-token experts' per-call cost that does not scale with bytes (perf-notes, "what
  # the FP8 layer shares with the bf16 one": F ~ 8 us inferred for the layer from two points and an assumed rate)
  FASTPATH_LAUNCH_MEMO=0 timeout 200 python3 scripts/moe_profile.py --fixed --json "$OUT/fixed.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/fixed.log" ;;
188|190|191)  # (ran on an H100 at eae8352: DOWN_PREFETCH FP8 layer 21.2 -> 24.4 us, Qwen3-30B-A3B FP8 16 layers -6.3%;
  # GATE_UP_ROTATE +1.2%; both removed in the seventy-fourth session, so this case no longer runs; fixed cost bf16
  # 4.5 us, fp8 6.0 us)
  # seventy-third session: the seventy-second's 188 (GATE_UP_ROTATE: programs starting their H steps at
  # their own step) and 190 (DOWN_PREFETCH: the gate/up programs prefetching their expert's down rows into L2), in one
  # call (190 ran on an H100 at e3696f2 and nothing compiled under triton 3.6: a default string argument in
  # matvec._load_as, fixed in 6129f8c): the compiled MoE / fp8 linear tests, both knobs' layer rows, the fixed cost
  # (189), and the engine A/B for DOWN_PREFETCH only while time is left
  compiled moe_tests.log 90 8 tests/ops/test_moe.py tests/ops/test_linear.py -k "prefetch or row_sum or fp8 or rows"
  layer_ab ops.moe_kernels.DOWN_PREFETCH moe_prefetch.log False True False True
  layer_ab ops.moe_kernels.GATE_UP_ROTATE moe_rotate.log False True False True
  OUT=$OUT bash "$0" 189
  [ $SECONDS -lt 330 ] && timeout $((560 - SECONDS)) python3 scripts/knob_ab.py --configs qwen3-30b-a3b:fp8 \
    --layers 16 --rounds 2 --variant "prefetch:moe_kernels.DOWN_PREFETCH=True" \
    --variant "off:moe_kernels.DOWN_PREFETCH=False" \
    --json "$OUT/knob_ab_prefetch.json" 2>&1 | grep -v -i warn | grep decode | tee "$OUT/knob_ab_prefetch.log" ;;
186)  # (ran on the H200 at dc2897d: 39.2x / 30.3x / 49.2x / 25.6x)
  # seventy-second session, on an H200 only: transformers beside today's fastpath in the same run (issues 6 and 7's
  # ratios; the standing ones were measured beside the fastpath of 2026-11-30)
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: 186 skipped"; exit 0; }
  for cfg in "qwen3-30b-a3b" "lfm2.5-8b-a1b" "qwen3.6-35b-a3b" "qwen3-8b"; do
    timeout $((585 - SECONDS)) python3 -m fastpath bench-decode --config $cfg --random-weights --hf \
      --json "$OUT/decode.jsonl" 2>&1 | grep -E "tok/s|Error|error" | tail -4
  done | tee "$OUT/decode_hf.log" ;;
192)  # seventy-fourth session: 189's fixed-cost fit on an H200 (it ran on an H100 at eae8352: bf16 F 4.5 us, B 3.06
  # TB/s; fp8 F 6.0 us, B 3.00 by hidden size), where the FP8 layer gains 1.29x over bf16 against the H100's 1.50x;
  # the FP8 / bf16 layer rows beside it; --parts: each row kernel's own fit too (where fp8's extra 1.5 us of F is)
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
    || echo "an H100: its hidden-size fits repeat eae8352's, the parts are new"
  FASTPATH_LAUNCH_MEMO=0 timeout 240 python3 scripts/moe_profile.py --fixed --parts --json "$OUT/fixed_parts.json" 2>&1 \
    | grep -v -i warn | tee "$OUT/fixed_parts.log"
  for r in 1 2; do
    timeout 30 python3 -m fastpath.bench moe --only "fp8 vs bf16" --graphs 2>&1 | grep -v -i warn | grep "graph"
  done | tee "$OUT/moe_layer.log" ;;
esac
