#!/usr/bin/env bash
# Try docs/two-hosts.md's quick start as written: its three shell blocks (prefill host, decode host,
# the client's curl) run word for word in two fresh network namespaces joined by a veth pair, each
# host with an empty HOME of its own. Passes when the curl prints `x-pd-bridge: complete`. Needs
# root. Everything it made (namespaces, veth, processes, folders) is removed whatever happens.
#
#   harness/two-hosts/try-quick-start.sh
set -u
cd "$(dirname "$0")/../.."
doc=docs/two-hosts.md
tag="pq$(( $$ % 100000 ))$(head -c2 /dev/urandom | od -An -tx1 | tr -d ' \n')"
pre="$tag-prefill" dec="$tag-decode"
work=$(mktemp -d "${TMPDIR:-/tmp}/pd-bridge-quick-start-XXXXXX")

teardown () {
  for ns in "$pre" "$dec"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill $pids 2>/dev/null
  done
  sleep 2
  for ns in "$pre" "$dec"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
  left=$( (ip netns list; ip -o link show) | grep -c "$tag")
  echo "try-quick-start: teardown: $left namespaces or interfaces of $tag left"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# The n-th ```sh block of the doc (1-based).
block () { awk -v n="$1" '/^```sh$/ { i++; on = (i == n); next } /^```$/ { on = 0 } on' "$doc"; }

ip netns add "$pre" && ip netns add "$dec" || exit 2
ip link add "${tag}p" type veth peer name "${tag}d" && ip link set "${tag}p" netns "$pre" && ip link set "${tag}d" netns "$dec" || exit 2
ip -n "$pre" addr add 198.18.0.1/30 dev "${tag}p" && ip -n "$dec" addr add 198.18.0.2/30 dev "${tag}d" || exit 2
for pair in "$pre ${tag}p" "$dec ${tag}d"; do set -- $pair; ip -n "$1" link set lo up; ip -n "$1" link set "$2" up; done
ip netns exec "$pre" tc qdisc add dev "${tag}p" root tbf rate 10gbit burst 1250000 latency 50ms
ip netns exec "$dec" tc qdisc add dev "${tag}d" root tbf rate 10gbit burst 1250000 latency 50ms

key=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
mkdir -p "$work/prefill-home" "$work/decode-home"
# The doc's `export PD_API_KEY=...` lines are the reader's to fill: the same key here.
run_on () { ip netns exec "$1" env HOME="$2" PD_API_KEY="$key" bash -c "$(printf '%s\n' "$3" | sed 's/^export PD_API_KEY=\.\.\..*$/export PD_API_KEY="$PD_API_KEY"/')"; }
echo "try-quick-start: prefill host ($pre)"
run_on "$pre" "$work/prefill-home" "$(block 1)" > "$work/prefill.log" 2>&1 || { cat "$work/prefill.log"; exit 1; }
echo "try-quick-start: decode host ($dec)"
run_on "$dec" "$work/decode-home" "$(block 2)" > "$work/decode.log" 2>&1 || { cat "$work/decode.log"; exit 1; }
# Wait (bounded: 4 minutes) for the front door, the prefill engine and the share to answer /health on the link.
up () { ip netns exec "$dec" curl -s -o /dev/null -w '%{http_code}' "$1/health" 2>/dev/null | grep -q 200; }
for _ in $(seq 1 120); do
  up http://198.18.0.2:8012 && up http://198.18.0.1:8000 && up http://198.18.0.1:8010 && break
  sleep 2
done
echo "try-quick-start: the client's request"
out=$(run_on "$dec" "$work/decode-home" "$(block 3)")
echo "$out"
if echo "$out" | grep -qi '^x-pd-bridge: complete'; then echo "try-quick-start: PASS"; exit 0; fi
echo "try-quick-start: FAIL (logs: the prefill and decode hosts printed:)"; tail -20 "$work/prefill.log" "$work/decode.log"
exit 1
