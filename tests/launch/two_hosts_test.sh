#!/bin/bash
# Why: a multi-node launch (Open MPI's daemons started by a launch agent, TCP
# between hosts, no shared memory) is only tested with two hosts. Two network
# namespaces joined by a veth pair stand in for them (10.77.0.1 and 10.77.0.2,
# addresses that exist inside the namespaces only, so no traffic leaves them):
# mpirun runs in the first, its launch agent (`ip netns exec NS`, mpirun's
# plm_rsh_agent) starts the daemon of the second, ranks talk over btl tcp.
# Two ranks, one per "host", must give the same step losses as two ranks on
# localhost, bit for bit. The namespaces are removed at the end, always (trap).
#   two_hosts_test.sh LONGCTX CONFIG DATA      (root; exit 77 = skipped without `ip`/root)
set -u
longctx=$(realpath "$1"); config=$(realpath "$2"); data=$(realpath "$3")
command -v ip > /dev/null || { echo "SKIP: two_hosts_test: 'ip' not found (apt-get install iproute2)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: two_hosts_test: needs root (ip netns)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d); chmod 755 "$work"
ns1=lctx-a-$$; ns2=lctx-b-$$; va=lva$$; vb=lvb$$
cleanup() { ip netns del "$ns1" 2> /dev/null; ip netns del "$ns2" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "two_hosts: FAIL: $*"; exit 1; }
ip netns add "$ns1" && ip netns add "$ns2" || fail "ip netns add"
ip link add "$va" type veth peer name "$vb" || fail "ip link add veth"
ip link set "$va" netns "$ns1" && ip link set "$vb" netns "$ns2" || fail "moving the veth ends"
ip -n "$ns1" addr add 10.77.0.1/24 dev "$va"; ip -n "$ns2" addr add 10.77.0.2/24 dev "$vb"
for n in "$ns1" "$ns2"; do ip -n "$n" link set lo up; done
ip -n "$ns1" link set "$va" up; ip -n "$ns2" link set "$vb" up
cat > "$work/agent.sh" <<AGENT
#!/bin/bash
# mpirun's launch agent: "agent.sh HOST COMMAND..." runs COMMAND in HOST's namespace.
host="\$1"; shift
case "\$host" in 10.77.0.1) ns=$ns1 ;; 10.77.0.2) ns=$ns2 ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent.sh"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' > "$work/hosts"
args=(train --config "$config" --data.path="$data" --steps=20 --log_every=1 --ckpt_every=0 --eval_every=0
      --eval_batches=1 --threads=1)
timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$longctx" "${args[@]}" \
  --out_dir="$work/local" > "$work/local.out" 2>&1 || { cat "$work/local.out"; fail "the localhost run failed"; }
timeout 300 ip netns exec "$ns1" mpirun --allow-run-as-root --bind-to none -np 2 --hostfile "$work/hosts" \
  --map-by node --mca plm_rsh_agent "$work/agent.sh" --mca btl tcp,self \
  --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
  -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
  "$longctx" "${args[@]}" --out_dir="$work/hosts-run" > "$work/hosts.out" 2>&1 ||
  { cat "$work/hosts.out"; fail "the two-namespace run failed"; }
python3 - "$work/local/metrics.jsonl" "$work/hosts-run/metrics.jsonl" <<'PY' || fail "losses differ"
import json, sys
def losses(p): return {e["step"]: e["loss"] for e in map(json.loads, open(p)) if e.get("kind") == "train"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
same = sum(1 for s in a if b.get(s) == a[s])
print(f"two_hosts: {same}/{len(a)} step losses over TCP between namespaces equal localhost's (step 20: {a[20]!r})")
sys.exit(0 if same == len(a) == 20 else 1)
PY
echo "two_hosts: PASS"
