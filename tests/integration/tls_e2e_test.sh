#!/usr/bin/env bash
# TLS on the gateway end to end: the real gantry-router with --tls-cert/--tls-key (a
# certificate the openssl CLI makes now) in front of a real gantry-worker serving a
# make-test-model bundle (scripted sampler, a test double, for exact text), and curl as
# the client, verifying the certificate with --cacert. A chat request, a streamed one,
# and bad handshakes (plain HTTP, TLS 1.1, an untrusting client) while the stream runs;
# the gRPC listener over TLS with the same files (tests/integration/grpc_chat_client);
# then the router still serves.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

make_test_bundle "$tmp/bundle" 2048 600 || { bad setup "make-test-model / bundle pack"; finish; }
words=$(printf ' word%.0s' $(seq 1 400))
cat >"$tmp/script.yaml" <<YAML
- match: "long"
  emit: "$words"
- match: ""
  emit: "Hello from Gantry."
YAML
write_models "$tmp/models.json" "$tmp/bundle" 2048 600
for name in server other; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=gantry-test -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$tmp/$name.key" -out "$tmp/$name.crt" 2>"$tmp/openssl.log" \
    || { bad setup "openssl req: $(cat "$tmp/openssl.log")"; finish; }
done
http=$(free_port); grpc=$(free_port)
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }  # plain workers: a 0700 dir
args=(--listen "127.0.0.1:$http" --workers "$workers"
      --policy deploy/demo/policy.yaml --models "$tmp/models.json")

# Configuration errors stop the router before it listens.
router/gantry-router "${args[@]}" --tls-cert "$tmp/server.crt" >"$tmp/half.log" 2>&1
[ $? = 2 ] && grep -q -- "--tls-cert and --tls-key go together" "$tmp/half.log" && ok tls-flags-pair \
  || bad tls-flags-pair "$(cat "$tmp/half.log")"
router/gantry-router "${args[@]}" --tls-cert "$tmp/server.crt" --tls-key "$tmp/other.key" >"$tmp/mismatch.log" 2>&1
[ $? = 1 ] && grep -q "invalid_tls_config\|mismatch" "$tmp/mismatch.log" && ok tls-key-mismatch \
  || bad tls-key-mismatch "$(cat "$tmp/mismatch.log")"

router/gantry-router "${args[@]}" --tls-cert "$tmp/server.crt" --tls-key "$tmp/server.key" \
  --grpc-listen "127.0.0.1:$grpc" >"$tmp/router.log" 2>&1 &
pids+=($!)
worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" \
  --script "$tmp/script.yaml" >"$tmp/worker.log" 2>&1 &
pids+=($!)
base="https://127.0.0.1:$http"
tls_curl() { curl -s --cacert "$tmp/server.crt" "$@"; }
ready() { for _ in $(seq 1 150); do tls_curl -f "$base/readyz" >/dev/null && return 0; sleep 0.1; done; return 1; }
ready && ok tls-ready || { bad tls-ready "$(tail -5 "$tmp/router.log" "$tmp/worker.log")"; finish; }

chat() {  # chat CONTENT -> the HTTP status; the body in $tmp/body
  tls_curl -o "$tmp/body" -w '%{http_code}' "$base/v1/chat/completions" \
    -H "Authorization: Bearer gantry-demo-dev" -H 'Content-Type: application/json' \
    -d "{\"model\": \"gantry-demo\", \"messages\": [{\"role\": \"user\", \"content\": \"$1\"}]}"
}
content() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body" 2>&1; }
status=$(chat "Say hello")
[ "$status" = 200 ] && [ "$(content)" = "Hello from Gantry." ] && ok tls-chat || bad tls-chat "$status $(cat "$tmp/body")"

# A stream, and bad handshakes while it runs.
tls_curl -N "$base/v1/chat/completions" -H "Authorization: Bearer gantry-demo-dev" \
  -H 'Content-Type: application/json' \
  -d '{"model": "gantry-demo", "stream": true, "messages": [{"role": "user", "content": "a long answer"}]}' \
  >"$tmp/sse" &
stream=$!
for _ in $(seq 1 100); do grep -q '^data: ' "$tmp/sse" && break; sleep 0.05; done
curl -s --max-time 5 "http://127.0.0.1:$http/healthz" >/dev/null; plain=$?
tls_curl --max-time 5 --tlsv1.1 --tls-max 1.1 --ciphers DEFAULT@SECLEVEL=0 "$base/healthz" >/dev/null; old=$?
curl -s --max-time 5 --cacert "$tmp/other.crt" "$base/healthz" >/dev/null; untrusted=$?
[ "$plain" != 0 ] && [ "$old" != 0 ] && [ "$untrusted" != 0 ] && ok tls-bad-handshakes-refused \
  || bad tls-bad-handshakes-refused "curl exit codes: plain $plain, tls1.1 $old, untrusted $untrusted"
wait "$stream"
text=$(python3 - "$tmp/sse" <<'PY'
import json, sys
text, done = "", False
for line in open(sys.argv[1]):
    line = line.strip()
    if line == "data: [DONE]":
        done = True
    elif line.startswith("data: "):
        for c in json.loads(line[6:]).get("choices", []):
            text += c["delta"].get("content") or ""
print(text.split() == ["word"] * 400, done)
PY
)
[ "$text" = "True True" ] && ok tls-stream || bad tls-stream "$text $(head -c 300 "$tmp/sse")"
# The gRPC listener speaks TLS with the same certificate; a plain-text client is refused.
gc=tests/integration/grpc_chat_client
"$gc" --ca "$tmp/server.crt" "127.0.0.1:$grpc" gantry-demo-dev chat gantry-demo "Say hello" >"$tmp/grpc-tls" 2>&1
grep -q '^text ' "$tmp/grpc-tls" && [ "$(tail -1 "$tmp/grpc-tls")" = "status 0 -" ] &&
  [ "$(grep '^text ' "$tmp/grpc-tls" | sed 's/^text //' | python3 -c 'import json,sys; print("".join(json.loads(l) for l in sys.stdin))')" = "Hello from Gantry." ] &&
  ok grpc-tls-chat || bad grpc-tls-chat "$(cat "$tmp/grpc-tls")"
"$gc" "127.0.0.1:$grpc" gantry-demo-dev models >"$tmp/grpc-plain" 2>&1
[ "$(tail -1 "$tmp/grpc-plain")" = "status 14 -" ] && ok grpc-plain-refused-on-tls || bad grpc-plain-refused-on-tls "$(cat "$tmp/grpc-plain")"
status=$(chat "Say hello again")
[ "$status" = 200 ] && ok tls-after || bad tls-after "$status $(cat "$tmp/body")"
grep -q '"http.tls_failed"' "$tmp/router.log" && ok tls-failures-logged || bad tls-failures-logged "$(tail -3 "$tmp/router.log")"
finish
