#!/bin/bash
# Why: one command line for `longctx train` under Open MPI on one or many hosts,
# so the flags that matter (ranks per node, threads per rank, the environment
# every rank needs, root-only flags) are written once instead of retyped.
#
#   launch/mpirun.sh [--hostfile FILE] [--np N] [--ranks_per_node K]
#                    [--threads_per_rank T] [--env NAME[=VALUE]]... [--mca K V]...
#                    [--dry_run] -- longctx train --config C [overrides...]
#
#  --hostfile         Open MPI hostfile ("host slots=K" lines); default localhost.
#  --np               total ranks; default ranks_per_node x hosts in the hostfile.
#  --ranks_per_node   ranks placed on each host (mpirun --map-by ppr:K:node).
#  --threads_per_rank OpenMP/BLAS threads per rank: sets OMP_NUM_THREADS and
#                     passes --threads=T to `longctx train` (0 = cores / local
#                     ranks, train/parallel/rank_threads.h).
#  --env NAME[=VALUE] exported to every rank (mpirun -x); repeatable. The
#                     LONGCTX_* and OMP_* variables of this shell always are.
#  --mca KEY VALUE    passed to mpirun (e.g. --mca btl_tcp_if_include eth0).
# The run-as-root flags are added only when run as root. Exit code: mpirun's —
# 0 finished, 75 preempted with a checkpoint (rerun to resume), other = error.
set -euo pipefail
hostfile=""; np=""; rpn=""; threads=""; dry=0
envs=(); mca=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hostfile) hostfile="$2"; shift 2 ;;
    --hostfile=*) hostfile="${1#*=}"; shift ;;
    --np) np="$2"; shift 2 ;;
    --np=*) np="${1#*=}"; shift ;;
    --ranks_per_node) rpn="$2"; shift 2 ;;
    --ranks_per_node=*) rpn="${1#*=}"; shift ;;
    --threads_per_rank) threads="$2"; shift 2 ;;
    --threads_per_rank=*) threads="${1#*=}"; shift ;;
    --env) envs+=("$2"); shift 2 ;;
    --env=*) envs+=("${1#*=}"); shift ;;
    --mca) mca+=(--mca "$2" "$3"); shift 3 ;;
    --dry_run) dry=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "launch/mpirun.sh: unknown option '$1' (the command goes after --)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "launch/mpirun.sh: no command after --" >&2; exit 2; }
if [ -n "$hostfile" ] && [ ! -r "$hostfile" ]; then
  echo "launch/mpirun.sh: --hostfile $hostfile: not readable" >&2; exit 2
fi
args=(--bind-to none)
[ "$(id -u)" -eq 0 ] && args+=(--allow-run-as-root) && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -n "$hostfile" ] && args+=(--hostfile "$hostfile")
if [ -n "$rpn" ]; then
  args+=(--map-by "ppr:${rpn}:node")
  if [ -z "$np" ]; then
    hosts=1
    [ -n "$hostfile" ] && hosts=$(grep -cvE '^\s*(#|$)' "$hostfile")
    np=$((rpn * hosts))
  fi
  # More ranks than cores is allowed (shared or small machines).
  args+=(--oversubscribe)
fi
[ -n "$np" ] && args+=(-np "$np")
cmd=("$@")
if [ -n "$threads" ]; then
  export OMP_NUM_THREADS="$threads"
  cmd+=("--threads=$threads")
fi
for e in "${envs[@]+"${envs[@]}"}"; do args+=(-x "$e"); done
for v in $(compgen -e | grep -E '^(LONGCTX_|OMP_)' || true); do args+=(-x "$v"); done
args+=("${mca[@]+"${mca[@]}"}")
if [ "$dry" -eq 1 ]; then printf '%q ' mpirun "${args[@]}" "${cmd[@]}"; echo; exit 0; fi
exec mpirun "${args[@]}" "${cmd[@]}"
