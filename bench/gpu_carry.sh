#!/usr/bin/env bash
# What the GPU machine lacks, in few enough bytes to travel: a `run` call carries 64 MiB with the
# working tree (~18 MiB), and gpu_stack.sh's wheels (~82 MB) and Postgres + Redis (~22 MB) do not
# fit in one. Here the wheels are unpacked once, botocore's service models cut to S3 and STS (28
# of its 30 MB; the stack's S3 client and moto's S3 server need no other), and packed with xz.
#
# Here (network, Debian 12 with postgresql-15 and redis-server), from the repository root:
#   bash bench/gpu_carry.sh pack DIR        # DIR/site/site.tar.xz (~44 MB): every wheel, unpacked
#                                           # DIR/native/native.tar.xz (~22 MB): Postgres, Redis
#                                           # (DIR/pack: gpu_stack.sh pack's wheels, kept)
# There, in one call or over two (each carrying one of the folders):
#   bash bench/gpu_carry.sh install DIR...  # into $GPU_STACK_DIR: site/ (on every process's
#                                           # PYTHONPATH: gpu_stack.sh env) and native/
#   touch $GPU_STACK_DIR/installed          # once native/ is in: gpu_session.sh's service parts go
set -euo pipefail
cd "$(dirname "$0")/.."
STACK=${GPU_STACK_DIR:-/tmp/uocr-stack}

pack() {
  local out=$1; mkdir -p "$out/site" "$out/native"
  [ -f "$out/pack/native.tar.xz" ] || bash bench/gpu_stack.sh pack "$out/pack"
  local tmp; tmp=$(mktemp -d)
  for wheel in "$out"/pack/wheels/*.whl; do unzip -q -o "$wheel" -d "$tmp"; done
  find "$tmp/botocore/data" -mindepth 1 -maxdepth 1 -type d ! -name s3 ! -name s3control ! -name sts \
    -exec rm -rf {} +
  rm -rf "$tmp"/*.data  # scripts (jmespath's jp.py): nothing here runs them
  tar -C "$tmp" -cf - . | xz -T0 -9 >"$out/site/site.tar.xz"
  cp "$out/pack/native.tar.xz" "$out/native/"
  rm -rf "$tmp"
  du -sh "$out/site/site.tar.xz" "$out/native/native.tar.xz"
}

install_carried() {
  mkdir -p "$STACK/site" "$STACK/native"
  for dir in "$@"; do
    if [ -f "$dir/site.tar.xz" ]; then tar -C "$STACK/site" -xJf "$dir/site.tar.xz"; fi
    if [ -f "$dir/native.tar.xz" ]; then tar -C "$STACK/native" -xJf "$dir/native.tar.xz"; fi
  done
  bash bench/gpu_stack.sh install  # the stack's folders, native/'s modes, the Postgres user
}

case "${1:-}" in
  pack) pack "${2:?pack DIR}" ;;
  install) shift; install_carried "$@" ;;
  *) echo "usage: $0 pack DIR | install DIR..." >&2; exit 2 ;;
esac
