#!/usr/bin/env bash
# mpirun across two hosts over TCP, for real on one machine: two network
# namespaces joined by a veth pair stand for the hosts, and a small agent
# that enters the host's namespace stands in for ssh (Open MPI's own
# launcher starts its daemon through it). Trains a tiny model on 2 ranks,
# one per "host", and checks that the losses equal a 2-rank run on one host
# bit for bit (gradient sums in a fixed order for a fixed N).
#   tests/scripts/mpi_two_hosts.sh path/to/hymba
# Exits 77 (CTest: skipped) where mpirun, root or namespaces are missing.
set -euo pipefail
HYMBA=$(realpath "$1")
skip() { echo "skipped: $1"; exit 77; }
command -v mpirun > /dev/null || skip "no mpirun"
command -v ip > /dev/null || skip "no ip (iproute2)"
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
"$HYMBA" info --json | grep -q '"built": true' || skip "hymba built without MPI"

tag="hy$$"
A="${tag}a" B="${tag}b"
HOST_A=10.199.7.1 HOST_B=10.199.7.2
work=$(mktemp -d)
cleanup() {
  ip netns del "$A" 2> /dev/null || true
  ip netns del "$B" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$A" 2> /dev/null || skip "cannot create network namespaces here"
ip netns add "$B"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$A"
ip link set "${tag}y" netns "$B"
ip -n "$A" addr add "$HOST_A/24" dev "${tag}x"
ip -n "$B" addr add "$HOST_B/24" dev "${tag}y"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "${tag}x" up
ip -n "$B" link set "${tag}y" up

# The agent Open MPI calls in place of ssh: AGENT HOST COMMAND...
cat > "$work/agent.sh" << AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done  # options meant for ssh
host=\$1; shift
case "\$host" in
  $HOST_A) ns=$A ;;
  $HOST_B) ns=$B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
touch "$work/agent-started.\$host"
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent.sh"
printf '%s slots=1\n%s slots=1\n' "$HOST_A" "$HOST_B" > "$work/hostfile"
for i in $(seq 1 400); do echo "the cat sat on the mat and the dog ran far away home $i"; done > "$work/toy.txt"

train() {  # OUT
  echo "--threads 1 train --preset hybrid-official --scale tiny --data $work/toy.txt --tokenizer-type byte --out $work/$1 \
--steps 4 --batch 4 --seq-len 32 --eval-interval 2 --eval-windows 4 --log-interval 1 --quiet"
}
common=(--allow-run-as-root --oversubscribe --bind-to none -np 2)
# shellcheck disable=SC2046
mpirun "${common[@]}" --mca btl self,vader --mca btl_vader_single_copy_mechanism none "$HYMBA" $(train local)
# shellcheck disable=SC2046
timeout 300 ip netns exec "$A" mpirun "${common[@]}" --hostfile "$work/hostfile" --map-by node \
  --mca plm_rsh_agent "$work/agent.sh" --mca btl self,tcp \
  --mca btl_tcp_if_include 10.199.7.0/24 --mca oob_tcp_if_include 10.199.7.0/24 \
  "$HYMBA" $(train hosts)

# Where the ranks ran, and the losses of both runs (timings left out).
losses() { grep -o '"\(loss\|val_loss\|train_loss\)": *[-0-9.e+]*' "$work/$1/metrics.jsonl"; }
[ -s "$work/hosts/metrics.jsonl" ] || { echo "FAIL: the two-host run wrote no metrics"; exit 1; }
[ -f "$work/agent-started.$HOST_B" ] || { echo "FAIL: mpirun did not launch through the agent on $HOST_B"; exit 1; }
if [ "$(losses local)" != "$(losses hosts)" ]; then
  echo "FAIL: the two-host run's losses differ from one host's"
  diff <(losses local) <(losses hosts) || true
  exit 1
fi
echo "two hosts ($HOST_A in $A, $HOST_B in $B): losses of $(losses hosts | wc -l) records equal one host's bit for bit"
