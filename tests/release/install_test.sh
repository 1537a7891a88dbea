#!/bin/bash
# Why: an install is only known to work by using it the way a user does, away
# from the source and build trees: this installs the build into a scratch
# prefix with `cmake --install` (cmake/LongctxInstall.cmake), checks every file
# the docs tell a user to run is there, then, from a scratch directory outside
# both trees, runs the installed binary: `--version` (its version must be the
# project's), `plan` and a 2-step `train` of the getting-started config
# (configs/main.textproto, on the demo corpus data/corpus/demo.ltok, which the
# demo_corpus fixture builds from .cache/npm), `plot` of that run, the
# installed mpirun launcher (--dry_run), the installed PyTorch peer script and,
# when the source tree has them, the installed tokenizer vocabularies. A file
# missing from the install rules, or one the binary still reads from the
# source tree, fails it.
#   [CMAKE=cmake] install_test.sh BUILD_DIR SOURCE_DIR VERSION DEMO_LTOK
set -u
build=$(realpath "$1"); src=$(realpath "$2"); version=$3; demo=$(realpath "$4")
fail() { echo "install_test: FAIL: $*"; exit 1; }
[ -f "$demo" ] || fail "no demo corpus at $demo (the demo_corpus fixture makes it)"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/longctx-install.XXXXXX") || fail "mktemp"
trap 'rm -rf "$scratch"' EXIT
case "$scratch/" in "$src"/*|"$build"/*) fail "scratch $scratch is inside the source or build tree";; esac
prefix=$scratch/prefix; work=$scratch/work; mkdir -p "$work"

echo "install_test: cmake --install $build --prefix $prefix"
"${CMAKE:-cmake}" --install "$build" --prefix "$prefix" > "$scratch/install.log" 2>&1 || { cat "$scratch/install.log"; fail "cmake --install failed"; }

# What README.md and docs/ tell a user to run or read.
for f in bin/longctx share/longctx/launch/mpirun.sh share/longctx/launch/slurm/longctx.sbatch \
         share/longctx/bench/torch_reference.py; do
  [ -x "$prefix/$f" ] || fail "$f is not installed (or not executable)"
done
for c in "$src"/configs/*.textproto "$src"/configs/*/*.textproto; do
  rel=${c#"$src"/configs/}
  [ -f "$prefix/share/longctx/configs/$rel" ] || fail "config $rel is not installed"
done
for f in LICENSE NOTICE README.md CHANGELOG.md docs/getting-started.md; do
  [ -f "$prefix/share/doc/longctx/$f" ] || fail "share/doc/longctx/$f is not installed"
done

cd "$work" || fail "cd $work"
unset LONGCTX_TOKENIZER_DIR
bin=$prefix/bin/longctx
configs=$prefix/share/longctx/configs

out=$("$bin" --version) || fail "longctx --version exited $?"
echo "$out"
first=$(printf '%s\n' "$out" | head -1)
[[ "$first" =~ ^longctx\ ([^ ]+)\ \((.+)\)$ ]] || fail "--version's first line '$first' is not 'longctx VERSION (GIT)'"
[ "${BASH_REMATCH[1]}" = "$version" ] || fail "--version says ${BASH_REMATCH[1]}, the project is $version"
printf '%s\n' "$out" | grep -q '^backends: cpu' || fail "--version names no backends"

"$bin" plan --config "$configs/main.textproto" > plan.txt 2>&1 || { cat plan.txt; fail "plan exited non-zero"; }
grep -q '^  total ' plan.txt || { cat plan.txt; fail "plan printed no total"; }
echo "install_test: plan: $(grep '^  total ' plan.txt | tail -1 | tr -s ' ')"

"$bin" train --config "$configs/main.textproto" --data.path="$demo" --steps=2 --log_every=1 --out_dir=run \
  > train.log 2>&1 || { cat train.log; fail "train exited non-zero"; }
steps=$(grep -c '"kind":"train"' run/metrics.jsonl 2>/dev/null)
[ "$steps" = 2 ] || { cat train.log; fail "run/metrics.jsonl has ${steps:-no} train lines, expected 2"; }
[ -f run/step-00000002/COMPLETE ] || fail "no complete checkpoint run/step-00000002 in the working directory"
grep '^step ' train.log | sed 's/^/install_test: /'

"$bin" plot --run run > plot.log 2>&1 || { cat plot.log; fail "plot exited non-zero"; }
[ -s run/plots/loss.png ] || { cat plot.log; fail "plot wrote no run/plots/loss.png"; }

dry=$("$prefix/share/longctx/launch/mpirun.sh" --np 2 --dry_run -- "$bin" train --config "$configs/main.textproto") \
  || fail "the installed launch/mpirun.sh --dry_run exited non-zero"
[[ "$dry" == *"-np 2"*"$bin train"* ]] || fail "mpirun.sh --dry_run printed '$dry'"

# The peer script the installed binary runs is the installed one (a stand-in
# python echoes the command it was given).
"$bin" bench --config "$configs/tiny-test.textproto" --steps=1 --peer=pytorch --python=/bin/echo > bench.log 2>&1
grep -q "$prefix/share/longctx/bench/torch_reference.py" bench.log || { cat bench.log; fail "bench --peer=pytorch did not run the installed bench/torch_reference.py"; }

if [ -f "$src/.cache/tokenizers/llama3.json" ]; then
  ids=$(echo "hello world" | "$bin" data encode --tokenizer llama3 2>&1) || fail "data encode --tokenizer llama3: $ids"
  echo "install_test: llama3 ids of 'hello world' from the installed vocabulary: $ids"
else
  echo "install_test: no .cache/tokenizers in the source tree: tokenizer lookup from the install not checked"
fi
echo "install_test: PASS"
