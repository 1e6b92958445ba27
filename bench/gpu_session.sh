#!/usr/bin/env bash
# Everything issues 13 and 16 measure, on one GPU box, one after another so that nothing shares
# the card (PARTS picks some): the GPU tests, the attention kernel, one MLP layer's kernels, the
# MoE tiles of a step of many sequences in the engine, the GPU's idle gaps inside runs of
# documents, the decode-step profile, the whole
# service (gpu_run.sh: the bare engine against the service, a worker killed), then the engine
# bench, the longest (a loan that ends early has still measured the service), and 128 documents
# again with a prefill's MoE each other way (the default is grouped_mm: fused_step.PREFILL_MOE),
# and a prefill pass beside the steps (overlap_bench).
#   bash bench/gpu_stack.sh install WHEELS_1            # what the tests and benches import
#   setsid nohup bash bench/gpu_session.sh OUTDIR >OUTDIR.log 2>&1 &
#   bash bench/gpu_stack.sh install WHEELS_2 && touch $GPU_STACK_DIR/installed   # the service's
# The service part waits for $GPU_STACK_DIR/installed: a lent machine's calls carry 64 MiB each,
# so the service's wheels may come with a later call while the first parts run. Make that call
# only once the first has returned: sent together, a first call refused its machine leaves the
# second to start a bare one and wait out its whole limit for a session never begun.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-/tmp/gpusession}
mkdir -p "$OUTDIR"
export GPU_STACK_DIR=${GPU_STACK_DIR:-/tmp/uocr-stack} PYTHONUNBUFFERED=1
export PYTHONPATH=$GPU_STACK_DIR/site:$PWD
PARTS=${PARTS:-tests attention mlp kernels tiles runs profile service engine prefill overlap}  # in order
# PARTS=picks: a card's own tiles and plan, then the goals table with them (~7 minutes)
# PARTS="tests real": issue 47's pages per card-hour at real output lengths, bare engine then the
# whole service at 16, 64 and 128 slots (~6 minutes each side; see the real part below)
part() { echo "== $1 $(date -u +%T)"; }
wanted() { [[ " $PARTS " == *" $1 "* ]]; }
CHECKPOINT=${CHECKPOINT:-/tmp/uocr-v1}
if wanted real && [ ! -f "$CHECKPOINT/config.json" ]; then  # written beside the tests (~1 min)
  python3 -m bench.engine.full_checkpoint "$CHECKPOINT" >"$OUTDIR/checkpoint.log" 2>&1 &
  CHECKPOINT_PID=$!
fi

if wanted tests; then
  part tests
  timeout 300 python3 -m pytest --noconftest -q -rf -m gpu \
    tests/worker/engines/unlimited_ocr/test_gpu.py tests/worker/engines/unlimited_ocr/test_gpu_parity.py \
    tests/worker/test_gpu_metrics.py >"$OUTDIR/gpu_tests.log" 2>&1
  tail -25 "$OUTDIR/gpu_tests.log"
fi
if wanted attention; then
  part attention
  timeout 300 python3 -m bench.engine.attention_bench --out "$OUTDIR" >"$OUTDIR/attention_bench.log" 2>&1
  grep -E "^ +[0-9]+ seqs" "$OUTDIR/attention_bench.log" || tail -20 "$OUTDIR/attention_bench.log"
fi
if wanted mlp; then
  part mlp
  timeout 300 python3 -m bench.engine.mlp_bench --out "$OUTDIR" >"$OUTDIR/mlp_bench.log" 2>&1
  tail -14 "$OUTDIR/mlp_bench.log"
fi
if wanted kernels; then  # a prefill pass's RoPE, routing and attention, each beside the one before
  part kernels
  timeout 120 python3 -m bench.engine.pass_kernels_bench --out "$OUTDIR" >"$OUTDIR/pass_kernels.log" 2>&1
  tail -16 "$OUTDIR/pass_kernels.log"
  timeout 120 python3 -m bench.engine.prefill_attention_bench --out "$OUTDIR" \
    >"$OUTDIR/prefill_attention.log" 2>&1
  tail -16 "$OUTDIR/prefill_attention.log"
fi
if wanted picks; then  # this card's own experts' tiles and attention plan at 128 sequences, then
  # the goals table with those that beat the defaults by more than 1% (engine/card_picks.py)
  part picks
  rm -f "$OUTDIR"/mlp_bench_*_picks.json "$OUTDIR"/attention_bench_*_picks.json  # none stale
  timeout 150 python3 -m bench.engine.mlp_bench --tokens 128 --tiles ${PICK_TILES:-default w8_n64_k128 \
    swap_plan_w4_n64_k64_s6 swap_plan_w8_n128_k64_s4 swap_plan_w4_n64_k64_s5 swap_plan_w4_n64_k128_s3 \
    swap_plan_w4_n128_k64_s4 swap_plan_w8_n64_k64_s4} \
    --out "$OUTDIR" --label picks >"$OUTDIR/mlp_picks.log" 2>&1
  # five and six stages: more K and V in flight a program for the H200's bandwidth (its best plan
  # read at 3.86 TB/s, ~90% of the 4.3 a copy moves there; the H100's reads all of its 3.0:
  # bench/RESULTS.md, "GPU engine: kernels" and "Open goals")
  timeout 150 python3 -m bench.engine.attention_bench --batches 128 --targets 2048 4096 8192 \
    --tiles ${PICK_PLANS:-mma_b16_w1_s2 mma_b16_w1_s3 mma_b16_w1_s4 mma_b16_w1_s5 mma_b16_w1_s6 mma_b32_w1_s3 \
    mma_b32_w1_s4 mma_b32_w1_s5} \
    --out "$OUTDIR" --label picks >"$OUTDIR/attention_picks.log" 2>&1
  # PICKED_*: the tiles part below reads TILES as its own list
  read -r PICKED_TILES PICKED_PLAN < <(python3 -m bench.engine.card_picks \
    "$OUTDIR"/mlp_bench_*_picks.json "$OUTDIR"/attention_bench_*_picks.json \
    2>"$OUTDIR/card_picks.log" || echo "- -")
  cat "$OUTDIR/card_picks.log"
  FLAGS=""
  [[ "${PICKED_TILES:--}" != "-" ]] && FLAGS="$FLAGS --moe-tiles $PICKED_TILES"
  [[ "${PICKED_PLAN:--}" != "-" ]] && FLAGS="$FLAGS --attention-plan $PICKED_PLAN"
  echo "goals with:${FLAGS:- the defaults}"
  timeout 420 python3 -m bench.engine.engine_bench --skip-baseline --workspace-gb 24 --pages 100 \
    --step-batches 1 16 128 --throughput-docs 16 128 --brief srswa --realistic-page-tokens 700 \
    --realistic-pages 16 $FLAGS --out "$OUTDIR" --label picks >"$OUTDIR/engine_bench_picks.log" 2>&1
  tail -12 "$OUTDIR/engine_bench_picks.log"
fi
if wanted tiles; then  # the step's many-token MoE tiles, A/B in the engine (engine/tiles_bench.py)
  part tiles
  timeout 420 python3 -m bench.engine.tiles_bench --tiles ${TILES:-w8_n64_k128 swap_plan_w4_n64_k64_s6} \
    --out "$OUTDIR" >"$OUTDIR/tiles_bench.log" 2>&1
  tail -8 "$OUTDIR/tiles_bench.log"
fi
if wanted runs; then  # the GPU's busy time and idle gaps a step, steady and in runs (engine/run_profile.py)
  part runs
  timeout 300 python3 -m bench.engine.run_profile --documents 16 128 --out "$OUTDIR" \
    >"$OUTDIR/run_profile.log" 2>&1
  grep -v USDT "$OUTDIR/run_profile.log" | tail -42
fi
if wanted profile; then
  part profile
  timeout 240 python3 -m bench.engine.step_profile --out "$OUTDIR" >"$OUTDIR/step_profile.log" 2>&1
  tail -30 "$OUTDIR/step_profile.log"
fi
if wanted service; then
  part service
  while [ ! -f "$GPU_STACK_DIR/installed" ]; do sleep 2; done
  BARE=${BARE:-16 128} SERVICE=${SERVICE-16 128} SERVICE_EP=${SERVICE_EP-16 128} BENCH_ARGS=${BENCH_ARGS:---pages 20 24 --page-tokens 64 --distinct 16} \
    bash bench/gpu_run.sh "$OUTDIR/service" >"$OUTDIR/service.log" 2>&1  # kept if the loan ends
  tail -40 "$OUTDIR/service.log"
fi
if wanted engine; then
  part engine
  timeout 600 python3 -m bench.engine.engine_bench --skip-baseline --compare-torch --workspace-gb 24 \
    --pages 100 --step-batches 1 16 128 --throughput-docs 16 128 --steps-only rswa_torch \
    --brief srswa --realistic-page-tokens 700 --realistic-pages 24 \
    --out "$OUTDIR" >"$OUTDIR/engine_bench.log" 2>&1
  tail -30 "$OUTDIR/engine_bench.log"
fi
if wanted prefill; then  # 128 documents again with a prefill's MoE each other way
  part prefill
  for moe in ${PREFILL_MOES:-module kernels}; do
    timeout 240 python3 -m bench.engine.engine_bench --skip-baseline --prefill-moe "$moe" --workspace-gb 24 \
      --pages 100 --step-batches 128 --throughput-docs 128 --brief rswa --sr-swa-blocks 0 \
      ${PREFILL_ARGS:-} --out "$OUTDIR" --label "prefill-moe-$moe" \
      >"$OUTDIR/engine_bench_prefill_$moe.log" 2>&1
    tail -4 "$OUTDIR/engine_bench_prefill_$moe.log"
  done
fi
if wanted real; then  # issue 47: bench/service/gpu_service_bench.py at real output lengths
  # Each page its own length (page_lengths.py: 12% short pages, the rest det blocks and tables,
  # rescaled to a mean of MEAN tokens), documents of 20 to 300 pages, two a group slot; at each
  # slot count the steady state is timed (the first SLOTS groups finished are the ramp, the next
  # max(WINDOW, SLOTS) the window), then the groups in flight drain. The bare engine first (it
  # writes $OUTDIR/bare.done), then the service once $GPU_STACK_DIR/installed exists (Postgres
  # and Redis may come with a later call), both into one gpu_service_bench_<card>_<date>_real.json.
  part real
  [ -n "${CHECKPOINT_PID:-}" ] && wait "$CHECKPOINT_PID" && tail -1 "$OUTDIR/checkpoint.log"
  REAL=(--checkpoint "$CHECKPOINT" --concurrency ${SLOTS:-16 64 128} --page-tokens-mix real
    --page-tokens-mean "${MEAN:-700}" --doc-pages 20 300 --window-groups "${WINDOW:-48}"
    --documents-per-slot 2 --label real --out "$OUTDIR" ${PRICE:+--price-per-hour "$PRICE"})
  timeout 560 python3 -m bench.service.gpu_service_bench --sides bare "${REAL[@]}" \
    >"$OUTDIR/real_bare.log" 2>&1
  tail -16 "$OUTDIR/real_bare.log"
  touch "$OUTDIR/bare.done"
  part real-service-waits
  while [ ! -f "$GPU_STACK_DIR/installed" ]; do sleep 1; done
  part real-service
  eval "$(bash bench/gpu_stack.sh env)"  # the stack's settings, as gpu_run.sh runs with
  # ~8 minutes on an H100 (a worker start ~35 s a slot count, 128 slots ~3 minutes): longer than
  # one call, so the call that brings Postgres and Redis waits for service.done, then another
  timeout 840 python3 -m bench.service.gpu_service_bench --sides service --engine-process "${REAL[@]}" \
    >"$OUTDIR/real_service.log" 2>&1
  tail -24 "$OUTDIR/real_service.log"
  cp "$GPU_STACK_DIR"/logs/gpu-worker.log "$OUTDIR/" 2>/dev/null
  bash bench/gpu_stack.sh stop
  touch "$OUTDIR/service.done"
fi
if wanted overlap; then  # a prefill pass beside the steps, on a second stream
  part overlap
  timeout 120 python3 -m bench.engine.overlap_bench --switch-us 500 --out "$OUTDIR" \
    >"$OUTDIR/overlap_bench.log" 2>&1
  tail -9 "$OUTDIR/overlap_bench.log"
fi
part done
