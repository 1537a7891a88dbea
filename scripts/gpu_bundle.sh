#!/usr/bin/env bash
# Why: the GPU half of the tests (scripts/gpu_check.sh) often runs on a machine
# that can run CUDA but not build longctx (no Abseil, protobuf, oneDNN there;
# a lent GPU box, a cluster's compute node), while the machine that builds it
# has no GPU. This script builds the CUDA binaries here and packs them with the
# non-system libraries they load into one folder (default .gpu/, ignored by
# git) that travels; on the GPU machine, from the repository root,
#   bash .gpu/check.sh            # gpu_check.sh on the bundled binaries
#   source .gpu/env.sh            # or: the library path, then any command
# The bundle records the commit it was built from (and whether the tree was
# dirty), and check.sh prints it first, so a stale bundle is seen at once.
# Left out of the bundle: glibc, libstdc++/libgcc, CUDA's own libraries
# (cudart, cuBLAS, NCCL) and Open MPI's, which must come from the GPU machine
# (its driver and mpirun must match them); env.sh searches for them there.
# Usage: scripts/gpu_bundle.sh [OUT]   (default .gpu)
# Env:   BUILD_DIR  build folder (default build-cuda)
#        CUDA_ARCH  CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#        SHARD      token file for gpu_check's training check (default
#                   data/corpus/tokens-byte/chunk1/example_train_2.ltok, made
#                   by scripts/prepare_demo_corpus.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.gpu}
BUILD=${BUILD_DIR:-build-cuda}
ARCH=${CUDA_ARCH:-90}
SHARD=${SHARD:-data/corpus/tokens-byte/chunk1/example_train_2.ltok}
fail() { echo "gpu_bundle: $*" >&2; exit 1; }

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || fail "nvcc not found: the CUDA toolkit is needed to build"
[ -f "$SHARD" ] || fail "token file $SHARD not found (LONGCTX_BIN=... bash scripts/prepare_demo_corpus.sh, or set SHARD)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLONGCTX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null
cmake --build "$BUILD" --target longctx backend_consistency_test nccl_communicator_mpi_check
BINS=("$BUILD/bin/longctx" "$BUILD/tests/backend_consistency_test" "$BUILD/tests/launch/nccl_communicator_mpi_check")

rm -rf "$OUT"
mkdir -p "$OUT/bin"
cp "${BINS[@]}" "$OUT/bin/"
cp "$SHARD" "$OUT/demo-shard.ltok"
lib_dir=$(mktemp -d)
trap 'rm -rf "$lib_dir"' EXIT
mkdir "$lib_dir/lib"
ldd "${BINS[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libmpi|libopen-pal|libopen-rte|libhwloc|libevent[_a-z0-9.-]*|libudev|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$lib_dir/lib/"; done
tar -C "$lib_dir" -cf - lib | xz -T0 -6 > "$OUT/lib.tar.xz"
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname), CMAKE_CUDA_ARCHITECTURES=$ARCH"
} > "$OUT/BUILT"

cat > "$OUT/env.sh" <<'EOF'
# Sourced on the GPU machine from the repository root: unpacks the bundled
# libraries (once) and puts them, and the machine's CUDA / NCCL / MPI
# libraries wherever they are, on LD_LIBRARY_PATH.
GPU_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GPU_BUNDLE_LIBS=${TMPDIR:-/tmp}/longctx-bundle-libs
if [ ! -d "$GPU_BUNDLE_LIBS/lib" ] || [ "$GPU_BUNDLE/lib.tar.xz" -nt "$GPU_BUNDLE_LIBS/lib" ]; then
  rm -rf "$GPU_BUNDLE_LIBS" && mkdir -p "$GPU_BUNDLE_LIBS" && tar -C "$GPU_BUNDLE_LIBS" -xJf "$GPU_BUNDLE/lib.tar.xz"
fi
_extra=""
for _so in libcudart.so.13 libcublas.so.13 libnccl.so.2 libmpi.so.40; do
  if ! ldconfig -p 2>/dev/null | grep -q "$_so"; then
    _f=$(find / -xdev -name "$_so" 2>/dev/null | head -1)
    [ -n "$_f" ] && _extra="$_extra:$(dirname "$_f")"
  fi
done
export LD_LIBRARY_PATH=$GPU_BUNDLE_LIBS/lib$_extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset _extra _so _f
EOF
cat > "$OUT/check.sh" <<'EOF'
#!/usr/bin/env bash
# On the GPU machine, from the repository root: scripts/gpu_check.sh on the
# bundled binaries. Extra arguments are ignored; GPU_CHECK_* variables pass.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cat "$here/BUILT"
source "$here/env.sh"
missing=$(ldd "$here"/bin/* | grep 'not found' || true)
[ -z "$missing" ] || { echo "gpu bundle: libraries not found on this machine:" >&2; echo "$missing" >&2; exit 1; }
GPU_CHECK_DATA=${GPU_CHECK_DATA:-$here/demo-shard.ltok} bash scripts/gpu_check.sh "$here/bin"
EOF
chmod +x "$OUT/check.sh"
cat "$OUT/BUILT"
du -sh "$OUT"
echo "gpu_bundle: $OUT ready; on the GPU machine, from the repository root: bash $OUT/check.sh"
