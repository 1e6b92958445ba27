#!/usr/bin/env bash
# The whole uocr service on one GPU machine that has no network: Postgres, Redis, the S3 server
# (moto), migrations and bucket, the API, a control worker with beat, and `uocr worker --gpus all`.
#
# On a machine with network (Debian 12 with postgresql-15 and redis-server installed), from the
# repository root:
#   bash bench/gpu_stack.sh pack DIR        # DIR/wheels: what the GPU box's Python 3.12 lacks;
#                                           # DIR/native.tar.xz: Postgres + Redis + their libraries
# On the GPU machine (its python3 holds torch), from the repository root:
#   bash bench/gpu_stack.sh install DIR...  # into $GPU_STACK_DIR (default /tmp/uocr-stack)
#   export UOCR_MODEL_PATH=... (and any UOCR_* engine settings)
#   bash bench/gpu_stack.sh start           # everything, the GPU worker last; waits until ready
#   bash bench/gpu_stack.sh worker          # (re)start the GPU worker with the current UOCR_* env
#   bash bench/gpu_stack.sh stop
#   eval "$(bash bench/gpu_stack.sh env)"   # the settings every process here runs with
# Logs: $GPU_STACK_DIR/logs/*.log (JSON lines). Processes run in their own sessions (setsid), so
# they outlive the shell that started them until `stop`.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
STACK=${GPU_STACK_DIR:-/tmp/uocr-stack}
PY=${PYTHON:-python3}
PG=$STACK/native/usr/lib/postgresql/15/bin
PG_USER=uocrpg
as_pg() {  # command... as the Postgres user, with the carried libraries
  if command -v runuser >/dev/null; then
    runuser -u "$PG_USER" -- env LD_LIBRARY_PATH="$STACK/native/lib" "$@"
  else
    setpriv --reuid=7432 --regid=7432 --clear-groups env LD_LIBRARY_PATH="$STACK/native/lib" "$@"
  fi
}
# Runtime wheels for Python 3.12 the GPU image lacks (it has torch, numpy, pillow, httpx, rich,
# click, prometheus-client, psutil, requests, jinja2, werkzeug, tokenizers, safetensors).
WHEELS="fastapi==0.165.0 fastapi-offline==1.7.7 starlette==1.10.0 uvicorn==0.55.0
python-multipart==0.0.34 pydantic==2.14.4 pydantic-core==2.50.5 pydantic-settings==2.16.3
typing-inspection==0.4.5 annotated-types python-dotenv sqlalchemy==2.1.9 alembic==1.20.1 mako==1.4.3
psycopg==3.3.9 psycopg-binary==3.3.9 celery==5.7.0 kombu==5.7.0 billiard==4.3.2 vine==5.1.0
amqp==5.4.2 click-didyoumean==0.3.1 click-plugins==1.1.1.2 click-repl==0.4.1 prompt-toolkit==3.0.53
wcwidth==0.9.4 redis==8.1.0 tzdata boto3==1.44.8 botocore==1.44.8 s3transfer==0.19.3 jmespath==1.1.0
structlog==26.1.0 pymupdf==1.28.2 transformers==5.24.0 moto==5.2.5 responses==0.26.3
xmltodict==1.0.4 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 flask==3.1.3 flask-cors==6.0.5
blinker==1.9.0 itsdangerous==2.2.0 py-partiql-parser opentelemetry-api tzlocal importlib-metadata"

pack() {
  local out=$1; mkdir -p "$out/wheels"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$out/wheels" $WHEELS
  local root; root=$(mktemp -d)
  chmod 755 "$root"  # mktemp's 700 would travel as the unpacked tree's mode: closed to Postgres
  mkdir -p "$root/usr/lib/postgresql/15" "$root/usr/share/postgresql" "$root/lib" "$root/bin"
  # Postgres finds share/ and lib/ relative to its binary: keep Debian's layout.
  cp -a /usr/lib/postgresql/15/bin /usr/lib/postgresql/15/lib "$root/usr/lib/postgresql/15/"
  rm -rf "$root/usr/lib/postgresql/15/lib/bitcode" "$root"/usr/lib/postgresql/15/lib/llvmjit*
  cp -a /usr/share/postgresql/15 "$root/usr/share/postgresql/15"
  cp /usr/bin/redis-server /usr/bin/redis-cli "$root/bin/"
  # Every library they link, except the C runtime the GPU image has in a newer version.
  { ldd "$root"/usr/lib/postgresql/15/bin/* /usr/bin/redis-server "$root"/usr/lib/postgresql/15/lib/*.so \
      2>/dev/null || true; } | awk '/=>/ {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so|ld-linux' |
    xargs -I{} cp -L {} "$root/lib/"
  tar -C "$root" -cf - . | xz -T0 -6 >"$out/native.tar.xz"
  rm -rf "$root"
}

install_stack() {
  mkdir -p "$STACK/site" "$STACK/native" "$STACK/logs" "$STACK/run"
  for dir in "$@"; do
    if compgen -G "$dir/*.whl" >/dev/null; then
      $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$STACK/site" "$dir"/*.whl
    fi
    [ -f "$dir/native.tar.xz" ] && tar -C "$STACK/native" -xJf "$dir/native.tar.xz"
  done
  chmod -R a+rX "$STACK/native"  # Postgres runs as its own user: whatever modes the pack kept
  chmod a+rx "$STACK"
  # Postgres never runs as root: a system user for it (images without useradd get a passwd line)
  id "$PG_USER" >/dev/null 2>&1 || useradd -M -r "$PG_USER" 2>/dev/null ||
    echo "$PG_USER:x:7432:7432::/nonexistent:/bin/false" >>/etc/passwd
}

env_vars() {
  cat <<VARS
export PYTHONPATH=$STACK/site:$REPO
export UOCR_DATABASE__URL=postgresql+psycopg://postgres@127.0.0.1:5432/postgres
export UOCR_DATABASE__POOL_SIZE=\${UOCR_DATABASE__POOL_SIZE:-20}
export UOCR_REDIS__URL=redis://127.0.0.1:6379/0
export UOCR_S3__ENDPOINT_URL=http://127.0.0.1:9000
export UOCR_ENGINE=\${UOCR_ENGINE:-unlimited_ocr}
export UOCR_WORKER__RENDER_PROCESSES=\${UOCR_WORKER__RENDER_PROCESSES:-16}
VARS
}

daemon() {  # name, command...: in its own session, so it outlives this shell
  local name=$1; shift
  setsid nohup "$@" >"$STACK/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STACK/run/$name.pid"
}

wait_for() {  # what, seconds, command...
  local what=$1 seconds=$2; shift 2
  for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "gpu_stack: $what did not come up in ${seconds}s; see $STACK/logs/" >&2; return 1
}

uocr() { $PY -m uocr_cli.main "$@"; }

start() {
  stop  # a restart: nothing left from an earlier start holds a port
  eval "$(env_vars)"
  export LD_LIBRARY_PATH_STACK=$STACK/native/lib
  if [ ! -f "$STACK/pg/PG_VERSION" ]; then  # none yet, or a start that failed half-way
    rm -rf "$STACK/pg"
    install -d -o "$PG_USER" "$STACK/pg"
    as_pg "$PG/initdb" -D "$STACK/pg" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  chmod 755 "$STACK" "$STACK/logs"; touch "$STACK/logs/postgres.log"; chown "$PG_USER" "$STACK/logs/postgres.log"
  as_pg "$PG/pg_ctl" -D "$STACK/pg" -l "$STACK/logs/postgres.log" -w start \
    -o "-c listen_addresses=127.0.0.1 -p 5432 -k /tmp -c max_connections=400 -c fsync=off" >/dev/null
  daemon redis env LD_LIBRARY_PATH="$LD_LIBRARY_PATH_STACK" "$STACK/native/bin/redis-server" \
    --bind 127.0.0.1 --port 6379 --save '' --appendonly no
  daemon s3 $PY -m moto.server -H 127.0.0.1 -p 9000
  wait_for redis 30 env LD_LIBRARY_PATH="$LD_LIBRARY_PATH_STACK" "$STACK/native/bin/redis-cli" ping
  wait_for "the S3 server" 60 $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9000')"
  uocr db upgrade
  uocr storage init
  daemon api $PY -m uocr_cli.main api --host 127.0.0.1 --workers 4
  daemon control $PY -m uocr_cli.main worker --queues control --concurrency 4 --beat
  wait_for "the API" 60 $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8100/readyz')"
  worker
}

worker() {
  eval "$(env_vars)"
  stop_one gpu-worker
  daemon gpu-worker $PY -m uocr_cli.main worker --gpus all
  # The model loads before the worker takes tasks: wait for the engine's "ready" line.
  local pid; pid=$(cat "$STACK/run/gpu-worker.pid")
  for _ in $(seq 3000); do
    grep -q '"engine.ready"' "$STACK/logs/gpu-worker.log" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "gpu_stack: the GPU worker did not get ready; see $STACK/logs/gpu-worker.log" >&2
  tail -20 "$STACK/logs/gpu-worker.log" >&2; return 1
}

stop_one() {
  local pid_file=$STACK/run/$1.pid
  [ -f "$pid_file" ] || return 0
  local pid; pid=$(cat "$pid_file")
  kill -TERM -- "-$pid" 2>/dev/null || true  # the whole session: launcher, children, renderers
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pid_file"
}

stop() {
  for name in gpu-worker control api s3 redis; do stop_one $name; done
  [ -d "$STACK/pg" ] && as_pg "$PG/pg_ctl" -D "$STACK/pg" -m fast -w stop >/dev/null 2>&1 || true
}

case "${1:-}" in
  pack) pack "${2:?pack DIR}" ;;
  install) shift; install_stack "$@" ;;
  start) start ;;
  worker) worker ;;
  stop) stop ;;
  env) env_vars ;;
  *) echo "usage: $0 pack DIR | install DIR... | start | worker | stop | env" >&2; exit 2 ;;
esac
