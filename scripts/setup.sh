#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for longctx and builds it (idempotent).
# Installs only Debian packages; configures CMake in ./build; builds everything.
# Usage: scripts/setup.sh [--no-build]   Env: BUILD_DIR (default build), LONGCTX_CUDA (AUTO|ON|OFF)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config git
      libabsl-dev libprotobuf-dev protobuf-compiler libzstd-dev zstd
      libopenmpi-dev openmpi-bin libopenblas-openmp-dev
      libgtest-dev libgmock-dev nlohmann-json3-dev python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# node and npm (for the npm-shipped corpora and tokenizer vocabularies) may come
# from outside Debian; install Debian's only when the commands are absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-build" ] && exit 0
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGCTX_CUDA="${LONGCTX_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: built $BUILD_DIR/bin/longctx"
