#!/usr/bin/env bash
# A worker on "another host" over tcp with CURVE (docs/router.md, "Workers on other
# hosts"): real gantry-router and gantry-worker processes, the workers in a network
# namespace of their own joined to this one by a veth pair, with addresses this test
# creates (and removes). A worker whose key is in the router's allow-list is served; one
# with an unknown key is refused by the ZAP handler (never READY, counted and logged by
# fingerprint) and requests meanwhile get 503 no_worker. Skipped (not passed) where
# network namespaces cannot be made.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

ns="gantry-w$$"
vh="gnh$$" vw="gnw$$"   # veth ends (at most 15 characters)
netns_cleanup() { ip netns del "$ns" 2>/dev/null; ip link del "$vh" 2>/dev/null; }
trap 'cleanup; netns_cleanup' EXIT
if ! command -v ip >/dev/null 2>&1 || ! ip netns add "$ns" 2>"$tmp/netns.err"; then
  skip curve-netns "network namespaces cannot be made here: $(cat "$tmp/netns.err" 2>/dev/null)"
  finish
fi
# A /30 in 10.0.0.0/8 that nothing on this host uses yet.
for _ in $(seq 1 20); do
  net="10.$((200 + RANDOM % 50)).$((RANDOM % 250))"
  ip -4 -o addr | grep -q "inet $net\." || ip -4 route show | grep -q "^$net\." || break
done
host_ip="$net.1" worker_ip="$net.2"
if ! { ip link add "$vh" type veth peer name "$vw" && ip link set "$vw" netns "$ns" &&
       ip addr add "$host_ip/30" dev "$vh" && ip link set "$vh" up &&
       ip netns exec "$ns" ip addr add "$worker_ip/30" dev "$vw" &&
       ip netns exec "$ns" ip link set "$vw" up && ip netns exec "$ns" ip link set lo up; } \
     2>"$tmp/veth.err"; then
  skip curve-netns "a veth pair cannot be made here: $(cat "$tmp/veth.err")"
  finish
fi
in_ns() { ip netns exec "$ns" "$@"; }

make_test_bundle "$tmp/bundle" 2048 64 || { bad setup "make-test-model / bundle pack"; finish; }
printf -- '- match: ""\n  emit: "Hello from Gantry."\n' >"$tmp/script.yaml"
write_models "$tmp/models.json" "$tmp/bundle" 2048 64
# Another bundle of the same model (another context length: another identity), which
# the member's key is not allowed to serve.
make_test_bundle "$tmp/bundle-other" 1024 64 || { bad setup "make-test-model / bundle pack (other)"; finish; }
for who in router member stranger; do "$g" keys gen-curve --out "$tmp/$who" >/dev/null; done
identity() { "$g" bundle verify "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity_sha256"])'; }
bundle_sha=$(identity "$tmp/bundle"); other_sha=$(identity "$tmp/bundle-other")
[ ${#bundle_sha} = 64 ] && [ ${#other_sha} = 64 ] && [ "$bundle_sha" != "$other_sha" ] ||
  { bad setup "bundle identities: '$bundle_sha' '$other_sha'"; finish; }
# The member's key may serve only the demo model with this bundle (docs/protocol.md,
# "Worker allow-list").
{ echo "# workers admitted by this router"
  echo "$(grep -v '^#' "$tmp/member.pub") models=gantry-demo bundles=$bundle_sha"; } >"$tmp/workers.allow"
http=$(free_port); zport=$(free_port)
endpoint="tcp://$host_ip:$zport"
router_args=(--listen "127.0.0.1:$http" --workers "$endpoint" --policy deploy/demo/policy.yaml
             --models "$tmp/models.json")

# The same router without CURVE on an address other hosts can reach refuses to start.
timeout 20 router/gantry-router "${router_args[@]}" >"$tmp/open.log" 2>&1
status=$?
[ "$status" = 1 ] && grep -q -- "--insecure-workers" "$tmp/open.log" && ok insecure-refused \
  || bad insecure-refused "exit $status: $(tail -3 "$tmp/open.log")"

# ... unless --insecure-workers says the network is trusted.
router/gantry-router "${router_args[@]}" --insecure-workers >"$tmp/insecure.log" 2>&1 &
insecure=$!
pids+=($insecure)
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$http/healthz" >/dev/null && break; sleep 0.1; done
curl -fs "http://127.0.0.1:$http/healthz" >/dev/null && ok insecure-allowed \
  || bad insecure-allowed "$(tail -3 "$tmp/insecure.log")"
kill "$insecure"; wait "$insecure" 2>/dev/null

router/gantry-router "${router_args[@]}" --curve-key "$tmp/router.key" \
  --worker-keys "$tmp/workers.allow" >"$tmp/router.log" 2>&1 &
pids+=($!)
up() { for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$http/healthz" >/dev/null && return 0; sleep 0.1; done; return 1; }
up || { bad router-up "$(tail -5 "$tmp/router.log")"; finish; }
metric() { curl -s "http://127.0.0.1:$http/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
worker() {  # worker ID KEYNAME [BUNDLE]: a gantry-worker in the namespace
  in_ns worker/server/gantry-worker --bundle "${3:-$tmp/bundle}" --router "$endpoint" \
    --script "$tmp/script.yaml" --worker-id "$1" --curve-key "$tmp/$2.key" \
    --router-key "$tmp/router.pub" >>"$tmp/worker-$1.log" 2>&1 &
  pids+=($!)
}
# The namespace is another host: the router's loopback listener is out of its reach.
in_ns curl -s --max-time 2 "http://127.0.0.1:$http/healthz" >/dev/null && bad isolated "loopback reachable" \
  || ok isolated

# An unknown key: the ZAP handler refuses it, it never becomes a worker.
worker stranger stranger
for _ in $(seq 1 150); do [ "$(metric gantry_router_worker_handshakes_refused_total)" -ge 1 ] 2>/dev/null && break; sleep 0.1; done
refused=$(metric gantry_router_worker_handshakes_refused_total)
[ "${refused:-0}" -ge 1 ] && ok refused-metric || bad refused-metric "refused_total=$refused"
fp=$("$g" keys fingerprint "$tmp/stranger.pub")
grep '"broker.worker_refused"' "$tmp/router.log" | grep -q "\"key_fingerprint\":\"$fp\"" \
  && ok refused-logged || bad refused-logged "no refusal line for $fp: $(tail -3 "$tmp/router.log")"
# The refused worker learns why from its own log, not only from silence.
for _ in $(seq 1 50); do grep -q '"curve.handshake_failed"' "$tmp/worker-stranger.log" && break; sleep 0.1; done
grep '"curve.handshake_failed"' "$tmp/worker-stranger.log" | grep -q 'ZAP handler (status 400)' \
  && ok refused-worker-knows || bad refused-worker-knows "$(tail -3 "$tmp/worker-stranger.log")"
secret=$(grep -v '^#' "$tmp/stranger.key")
grep -qF -- "$secret" "$tmp/router.log" "$tmp/worker-stranger.log" && bad no-secret-logged "a secret key is in a log" \
  || ok no-secret-logged
chat() {  # prints the HTTP status; the body goes to $tmp/body
  curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http/v1/chat/completions" \
    -H "Authorization: Bearer gantry-demo-dev" -H 'Content-Type: application/json' \
    -d '{"model": "gantry-demo", "messages": [{"role": "user", "content": "Say hello"}]}'
}
status=$(chat)
[ "$status" = 503 ] && grep -q '"code":"no_worker"' "$tmp/body" && ok refused-no-worker \
  || bad refused-no-worker "$status $(cat "$tmp/body")"

# A listed key: admitted, READY, served through the router.
worker member member
ready() { for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && return 0; sleep 0.1; done; return 1; }
ready && ok curve-worker-ready || bad curve-worker-ready "$(tail -3 "$tmp/router.log" "$tmp/worker-member.log")"
status=$(chat)
content=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["choices"][0]["message"]["content"])' "$tmp/body" 2>&1)
[ "$status" = 200 ] && [ "$content" = "Hello from Gantry." ] && ok curve-chat || bad curve-chat "$status $(cat "$tmp/body")"
[ "$(metric gantry_router_worker_handshakes_admitted_total)" -ge 1 ] 2>/dev/null && ok admitted-metric \
  || bad admitted-metric "$(metric gantry_router_worker_handshakes_admitted_total)"
# The member's own key claiming a bundle its allow-list entry does not name: refused
# (worker_not_allowed, logged by the router; the worker logs the DISCONNECT's code), and
# the real worker keeps serving.
worker impostor member "$tmp/bundle-other"
for _ in $(seq 1 150); do grep -q '"code":"worker_not_allowed"' "$tmp/router.log" && break; sleep 0.1; done
grep '"broker.ready_refused"' "$tmp/router.log" | grep '"worker_id":"impostor"' |
  grep -q "\"bundle\":\"$other_sha\"" && ok other-bundle-refused ||
  bad other-bundle-refused "$(grep -E 'ready_refused|impostor' "$tmp/router.log" | head -3)"
for _ in $(seq 1 50); do grep -q '"code":"worker_not_allowed"' "$tmp/worker-impostor.log" && break; sleep 0.1; done
grep -q '"code":"worker_not_allowed"' "$tmp/worker-impostor.log" && ok refused-worker-told ||
  bad refused-worker-told "$(tail -3 "$tmp/worker-impostor.log")"
status=$(chat)
[ "$status" = 200 ] && ok real-worker-keeps-serving || bad real-worker-keeps-serving "$status $(cat "$tmp/body")"
# The stranger kept trying and never reached READY (the broker never saw its worker id).
if grep -q '"worker_id":"member"' "$tmp/router.log" && ! grep -q '"stranger"' "$tmp/router.log"; then
  ok refused-never-ready
else
  bad refused-never-ready "$(grep -E 'member|stranger' "$tmp/router.log" | head -3)"
fi
finish
