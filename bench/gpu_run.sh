#!/usr/bin/env bash
# Issue 13's measurement on one GPU box, start to end: the bare engine, then the whole service at
# the same concurrencies on the same documents, then a GPU worker killed mid-document. Expects
# `bash bench/gpu_stack.sh install DIR...` done; writes OUTDIR/gpu_service_bench_<card>_<date>.json
# (bench/harness.py names it) and logs.
#   setsid nohup bash bench/gpu_run.sh /tmp/gpurun >/tmp/gpurun.log 2>&1 &
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-/tmp/gpurun}
mkdir -p "$OUTDIR"
export GPU_STACK_DIR=${GPU_STACK_DIR:-/tmp/uocr-stack} PYTHONUNBUFFERED=1
eval "$(bash bench/gpu_stack.sh env)"
CHECKPOINT=${CHECKPOINT:-/tmp/uocr-v1}
[ -f "$CHECKPOINT/config.json" ] || python3 -m bench.engine.full_checkpoint "$CHECKPOINT"
python3 -m uocr_cli.main model verify "$CHECKPOINT"
# service/bare at 16 and 128 groups per GPU: the service with its engine in a child process
# (SERVICE_EP, with the killed worker) and in the worker's process (SERVICE, also at 64).
# BENCH_ARGS: e.g. "--pages 20 24"; KILL="" leaves out the killed worker; an empty list skips.
# The bare engine with one group per vision call (as before vision_batcher.py), then the default.
python3 -m bench.service.gpu_service_bench --checkpoint "$CHECKPOINT" --concurrency ${BARE:-16 128} \
  --sides bare --vision-batch-pages ${VISION_BATCH:-1 32} --documents-per-slot ${BACKLOG:-1} \
  --out "$OUTDIR" ${BENCH_ARGS:-}
# SERVICE_DOCS: documents per service run, at least its concurrency (64 at 16 groups: memory
# after each document past the in-flight set, as issue 13 asks). BACKLOG: documents per group
# slot, bare and service alike (2: a backlog, so the service's slots can all be held).
# ROUNDS: the service runs its documents this many times on one worker (its idle memory after each).
# AHEAD: render_ahead_groups to run first at SERVICE_EP's concurrencies, beside the default.
[ -n "${SERVICE_EP-16 128}" ] && for ahead in ${AHEAD:-}; do
  python3 -m bench.service.gpu_service_bench --checkpoint "$CHECKPOINT" --concurrency ${SERVICE_EP-16 128} \
    --sides service --engine-process --render-ahead "$ahead" --documents ${SERVICE_DOCS:-64} \
    --documents-per-slot ${BACKLOG:-1} --out "$OUTDIR" ${BENCH_ARGS:-}
done
[ -n "${SERVICE_EP-16 128}" ] && python3 -m bench.service.gpu_service_bench --checkpoint "$CHECKPOINT" \
  --concurrency ${SERVICE_EP-16 128} --sides service --engine-process ${KILL---kill} --rounds ${ROUNDS:-1} \
  --documents ${SERVICE_DOCS:-64} --documents-per-slot ${BACKLOG:-1} --out "$OUTDIR" ${BENCH_ARGS:-}
[ -n "${SERVICE-16 64 128}" ] && python3 -m bench.service.gpu_service_bench --checkpoint "$CHECKPOINT" \
  --concurrency ${SERVICE-16 64 128} --sides service --documents-per-slot ${BACKLOG:-1} \
  --out "$OUTDIR" ${BENCH_ARGS:-}
cp "$GPU_STACK_DIR"/logs/gpu-worker.log "$GPU_STACK_DIR"/logs/control.log "$OUTDIR/" 2>/dev/null
bash bench/gpu_stack.sh stop
echo RUN-DONE
