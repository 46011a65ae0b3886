#!/usr/bin/env bash
# The whole path with real processes over real sockets: gantry-router (HTTP, the demo
# policy, the ledger in the Postgres of tests/run) and gantry-worker serving a packed
# make-test-model bundle (the Qwen3 tokenizer and template from deploy/demo) with the
# scripted sampler, a test double, where exact text matters.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

# A bundle.
make_test_bundle "$tmp/bundle" 2048 64 || { bad setup "make-test-model / bundle pack"; finish; }
# Long enough that the worker cannot finish before the test kills it (1,500 tokens).
words=$(printf ' word%.0s' $(seq 1 1500))
cat >"$tmp/script.yaml" <<YAML
- match: "long"
  emit: "$words"
- match: "weather in Paris"
  emit: "<tool_call>\\n{\\"name\\": \\"read_file\\", \\"arguments\\": {\\"path\\": \\"/workspace/paris.txt\\"}}\\n</tool_call>"
- match: "sunny"
  emit: "It is sunny in Paris."
- match: ""
  emit: "Hello from Gantry."
YAML
write_models "$tmp/models.json" "$tmp/bundle" 2048 64
ledger_args=()
if [ -n "${GANTRY_TEST_PG_URL:-}" ]; then
  db="t_e2e_$$_$RANDOM"
  psql -q "$GANTRY_TEST_PG_URL" -c "CREATE DATABASE $db" && ledger_url="${GANTRY_TEST_PG_URL%/*}/$db"
  # The owner sets the ledger up (and the key); the routers log in as the writer role.
  export GANTRY_LEDGER_KEY="$tmp/ledger.key"
  writer_url=$("$g" ledger setup --db "$ledger_url") || bad ledger-setup "$writer_url"
  ledger_args=(--ledger "$writer_url" --ledger-spool "$tmp/spool")
fi
http=$(free_port); grpc=$(free_port)
# Plain workers (no CURVE) only where no one else can connect: without --insecure-workers
# the router refuses loopback tcp and an ipc directory others may open, before it listens.
router/gantry-router --listen "127.0.0.1:$http" --workers "tcp://127.0.0.1:$(free_port)" \
  --policy deploy/demo/policy.yaml --models "$tmp/models.json" >"$tmp/plain-tcp.log" 2>&1; a=$?
open_dir=$(mktemp -d /tmp/gantry-open.XXXXXX); chmod 755 "$open_dir"
router/gantry-router --listen "127.0.0.1:$http" --workers "ipc://$open_dir/workers.sock" \
  --policy deploy/demo/policy.yaml --models "$tmp/models.json" >"$tmp/plain-open.log" 2>&1; b=$?
rm -rf "$open_dir"
[ "$a$b" = 11 ] && grep -q -- "--insecure-workers" "$tmp/plain-tcp.log" &&
  grep -q "mode 0755" "$tmp/plain-open.log" && ok plain-workers-need-a-private-endpoint ||
  bad plain-workers-need-a-private-endpoint "$a$b $(cat "$tmp/plain-tcp.log" "$tmp/plain-open.log")"
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }
router/gantry-router --listen "127.0.0.1:$http" --workers "$workers" \
  --grpc-listen "127.0.0.1:$grpc" --policy deploy/demo/policy.yaml --models "$tmp/models.json" "${ledger_args[@]}" >"$tmp/router.log" 2>&1 &
router_pid=$!
pids+=($router_pid)
start_worker() {  # [ENDPOINT]: the router's worker endpoint (default: the first router's)
  worker/server/gantry-worker --bundle "$tmp/bundle" --router "${1:-$workers}" \
    --script "$tmp/script.yaml" >>"$tmp/worker.log" 2>&1 &
  worker=$!
  pids+=($worker)
}
start_worker
ready() {  # [HTTP_PORT]
  for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:${1:-$http}/readyz" >/dev/null && return 0; sleep 0.1; done
  return 1
}
ready && ok ready || { bad ready "$(tail -5 "$tmp/router.log" "$tmp/worker.log")"; finish; }

chat() {  # chat KEY BODY -> prints "STATUS\nBODY"
  curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http/v1/chat/completions" \
    -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d "$2"
}
body='{"model": "gantry-demo", "messages": [{"role": "user", "content": "Say hello"}]}'
status=$(chat gantry-demo-dev "$body")
content=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["choices"][0]["message"]["content"], d["choices"][0]["finish_reason"], d["usage"]["completion_tokens"] > 0)' "$tmp/body" 2>&1)
[ "$status" = 200 ] && [ "$content" = "Hello from Gantry. stop True" ] && ok chat || bad chat "$status $content $(cat "$tmp/body")"

stream='{"model": "gantry-demo", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "Say hello"}]}'
curl -sN "http://127.0.0.1:$http/v1/chat/completions" -H "Authorization: Bearer gantry-demo-dev" \
  -H 'Content-Type: application/json' -d "$stream" >"$tmp/sse"
joined=$(python3 - "$tmp/sse" <<'PY'
import json, sys
text, usage, done, finish = "", None, False, None
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("data: "):
        continue
    data = line[6:]
    if data == "[DONE]":
        done = True
        continue
    chunk = json.loads(data)
    if chunk.get("usage"):
        usage = chunk["usage"]
    for c in chunk.get("choices", []):
        text += c["delta"].get("content") or ""
        finish = c.get("finish_reason") or finish
print(text, finish, usage is not None and usage["completion_tokens"] > 0, done)
PY
)
[ "$joined" = "Hello from Gantry. stop True True" ] && ok stream-equals-non-streamed || bad stream-equals-non-streamed "$joined"

status=$(chat not-a-key "$body"); [ "$status" = 401 ] && ok unknown-key-401 || bad unknown-key-401 "$status"

# The gRPC Gateway: the same pipeline over HTTP/2 (tests/integration/grpc_chat_client.cc).
# As admin: dana's 30 requests a minute are for the checks below.
gc=tests/integration/grpc_chat_client
summary() {  # summary FILE -> "FIRST_EVENT PRIORITY TEXT_EVENTS JOINED_TEXT TERMINAL STATUS"
  python3 - "$1" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
texts = [json.loads(l[5:]) for l in lines if l.startswith("text ")]
first = lines[0].split() if lines else ["none", "", ""]
term = [l for l in lines if l.startswith("terminal ")]
print(first[0], first[2] if len(first) > 2 else "-", len(texts), repr("".join(texts)),
      term[0] if term else "no-terminal", lines[-1] if lines else "")
PY
}
"$gc" "127.0.0.1:$grpc" gantry-demo-admin chat gantry-demo "Say hello" >"$tmp/grpc-dev" 2>&1
read -r first prio dev_texts dev_rest <<<"$(summary "$tmp/grpc-dev")"
[ "$first $prio" = "admitted PRIORITY_INTERACTIVE" ] &&
  [ "$dev_rest" = "'Hello from Gantry.' terminal FINISH_STOP - status 0 -" ] &&
  ok grpc-chat-equals-http || bad grpc-chat-equals-http "$(cat "$tmp/grpc-dev")"
# Accessibility (ada): admitted first, then the text in sentences, not token fragments.
"$gc" "127.0.0.1:$grpc" gantry-demo-a11y chat gantry-demo "Say hello" >"$tmp/grpc-ada" 2>&1
read -r first prio ada_texts ada_rest <<<"$(summary "$tmp/grpc-ada")"
[ "$first $prio" = "admitted PRIORITY_ACCESSIBILITY" ] && [ "$ada_texts" = 1 ] &&
  [ "$dev_texts" -gt 1 ] && [ "$ada_rest" = "$dev_rest" ] &&
  ok grpc-accessibility-sentences || bad grpc-accessibility-sentences "dev: $dev_texts texts; $(cat "$tmp/grpc-ada")"
curl -sN "http://127.0.0.1:$http/v1/chat/completions" -H "Authorization: Bearer gantry-demo-a11y" \
  -H 'Content-Type: application/json' -d "$stream" >"$tmp/sse-ada"
[ "$(head -c 10 "$tmp/sse-ada")" = ": admitted" ] && grep -q '"content":"Hello from Gantry."' "$tmp/sse-ada" &&
  ok sse-accessibility-admitted-then-sentence || bad sse-accessibility-admitted-then-sentence "$(head -c 600 "$tmp/sse-ada")"
"$gc" "127.0.0.1:$grpc" not-a-key chat gantry-demo "Say hello" >"$tmp/grpc-bad" 2>&1
[ "$(tail -1 "$tmp/grpc-bad")" = "status 16 unauthenticated" ] && [ "$(wc -l <"$tmp/grpc-bad")" = 1 ] &&
  ok grpc-unknown-key-unauthenticated || bad grpc-unknown-key-unauthenticated "$(cat "$tmp/grpc-bad")"
# A keyless flood (32 Chat calls of 8 MB at once on one connection) is refused on its
# metadata: the router's peak memory does not grow by the messages (it grew by about
# 190 MiB when gRPC read each message before the key was checked).
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$router_pid/status"; }
hwm_before=$(hwm)
"$gc" "127.0.0.1:$grpc" - flood 32 8000000 >"$tmp/grpc-flood" 2>&1
hwm_growth_kb=$(( $(hwm) - hwm_before ))
[ "$(cat "$tmp/grpc-flood")" = "32 status 16 unauthenticated" ] && [ "$hwm_growth_kb" -lt 65536 ] &&
  ok grpc-keyless-flood-unread || bad grpc-keyless-flood-unread "peak grew $hwm_growth_kb kB; $(cat "$tmp/grpc-flood")"
"$gc" "127.0.0.1:$grpc" gantry-demo-admin models >"$tmp/grpc-models" 2>&1
grep -q "^model gantry-demo 2048 64 1 " "$tmp/grpc-models" && [ "$(tail -1 "$tmp/grpc-models")" = "status 0 -" ] &&
  ok grpc-list-models || bad grpc-list-models "$(cat "$tmp/grpc-models")"
# A gRPC client that cancels mid-stream: the request ends cancelled (ledger below) and
# the worker serves the next request.
"$gc" "127.0.0.1:$grpc" gantry-demo-admin chat gantry-demo "a long one" --cancel-after-text >"$tmp/grpc-cancel" 2>&1
cancelled_id=$(awk '/^admitted/ {print $2}' "$tmp/grpc-cancel")
[ "$(tail -1 "$tmp/grpc-cancel")" = "status 1 -" ] && status=$(chat gantry-demo-admin "$body") && [ "$status" = 200 ] &&
  ok grpc-client-cancel || bad grpc-client-cancel "$status $(head -3 "$tmp/grpc-cancel"; tail -2 "$tmp/grpc-cancel")"
status=$(chat gantry-demo-dev '{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}')
{ [ "$status" = 403 ] || [ "$status" = 404 ]; } && ok unknown-model-4xx || bad unknown-model-4xx "$status"
status=$(chat gantry-demo-dev '{"model": "gantry-demo", "messages": [{"role": "user", "content": "x"}], "temperature": 1.8}')
[ "$status" = 403 ] && grep -q policy_denied "$tmp/body" && ok parameter-out-of-range-403 || bad parameter-out-of-range-403 "$status $(cat "$tmp/body")"
status=$(chat gantry-demo-dev '{"model": "gantry-demo", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5000}')
[ "$status" = 400 ] && grep -q context_length_exceeded "$tmp/body" && ok context-400 || bad context-400 "$status $(cat "$tmp/body")"
status=$(chat gantry-demo-dev '{"model": "gantry-demo", "messages": [')
[ "$status" = 400 ] && grep -q invalid_json "$tmp/body" && ok malformed-json-400 || bad malformed-json-400 "$status"

# Tool calls: the declared protocol (hermes_json) parsed by the worker, returned in
# OpenAI form; the second turn carries the result under the same call id. The tool is
# one the demo policy grants dana (read_file, its path under /workspace/**): the router
# strips an offered tool that is not granted and denies a call to one.
tools='"tools": [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]'
status=$(chat gantry-demo-dev "{\"model\": \"gantry-demo\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}], $tools}")
call=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["choices"][0]; t=c["message"]["tool_calls"][0]; print(c["finish_reason"], t["function"]["name"], t["function"]["arguments"], t["id"])' "$tmp/body" 2>&1)
read -r finish name args call_id <<<"$call"
[ "$status" = 200 ] && [ "$finish $name $args" = 'tool_calls read_file {"path":"/workspace/paris.txt"}' ] && [[ "$call_id" == call_* ]] &&
  ok tool-call || bad tool-call "$status $call $(cat "$tmp/body")"
curl -sN "http://127.0.0.1:$http/v1/chat/completions" -H "Authorization: Bearer gantry-demo-dev" \
  -H 'Content-Type: application/json' \
  -d "{\"model\": \"gantry-demo\", \"stream\": true, \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}], $tools}" >"$tmp/tool-sse"
first=$(python3 - "$tmp/tool-sse" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("data: {"):
        for c in json.loads(line[6:])["choices"]:
            for t in c["delta"].get("tool_calls", []):
                print(t.get("index"), t.get("id", "")[:5], t.get("function", {}).get("name"))
                sys.exit(0)
PY
)
[ "$first" = "0 call_ read_file" ] && ok streamed-tool-call-first-delta || bad streamed-tool-call-first-delta "$first"
turn2="{\"model\": \"gantry-demo\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"$call_id\", \"type\": \"function\", \"function\": {\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"/workspace/paris.txt\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"$call_id\", \"content\": [{\"type\": \"text\", \"text\": \"sunny, 24 C\"}]}], $tools}"
status=$(chat gantry-demo-dev "$turn2")
answer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body" 2>&1)
[ "$status" = 200 ] && [ "$answer" = "It is sunny in Paris." ] && ok tool-result-second-turn || bad tool-result-second-turn "$status $answer"
# A tool the policy does not grant (get_weather) is taken off the request before the
# model sees it, and the response says so; a call of it the model writes anyway is not
# an offered tool: 422 invalid_tool_call, never plain text a client might run.
# As admin (a developer too): dana's 30 requests a minute are for the checks below.
weather='"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]'
status=$(curl -s -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http/v1/chat/completions" \
  -H "Authorization: Bearer gantry-demo-admin" -H 'Content-Type: application/json' \
  -d "{\"model\": \"gantry-demo\", \"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}], $weather}")
[ "$status" = 422 ] && grep -qi '^x-gantry-tools-stripped: get_weather' "$tmp/headers" && grep -q '"code":"invalid_tool_call"' "$tmp/body" &&
  ok ungranted-tool-stripped || bad ungranted-tool-stripped "$status $(cat "$tmp/headers" "$tmp/body")"

# Rates by reservation: the demo's batch account may send 10 requests a minute.
codes=""
for i in $(seq 1 11); do
  codes+=" $(curl -s -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http/v1/chat/completions" \
    -H "Authorization: Bearer gantry-demo-batch" -H 'Content-Type: application/json' \
    -d '{"model": "gantry-demo", "max_tokens": 4, "messages": [{"role": "user", "content": "Say hello"}]}')"
done
[ "$codes" = "$(printf ' 200%.0s' $(seq 1 10)) 429" ] && grep -q rate_limited "$tmp/body" &&
  grep -qi '^retry-after: [1-9]' "$tmp/headers" && ok rate-limit-429-retry-after ||
  bad rate-limit-429-retry-after "codes:$codes $(cat "$tmp/body")"

# A second router on the same database shares the budgets and rates
# (router/budget/budget_sync.h): the batch account's 10 requests of this minute were
# admitted by the first router, so the second refuses the 11th; others are served.
if [ ${#ledger_args[@]} -gt 0 ]; then
  http2=$(free_port); zport2=$(free_port)
  # This one takes plain workers on loopback tcp, as the operator said (--insecure-workers,
  # warned about at start).
  router/gantry-router --listen "127.0.0.1:$http2" --workers "tcp://127.0.0.1:$zport2" \
    --insecure-workers --policy deploy/demo/policy.yaml --models "$tmp/models.json" "${ledger_args[@]}" \
    --budget-sync-ms 100 >"$tmp/router2.log" 2>&1 &
  pids+=($!)
  first_worker=$worker; start_worker "tcp://127.0.0.1:$zport2"; worker=$first_worker  # kill -9 below: the first
  ready "$http2" && sleep 1  # a few exchanges with the first router
  grep -q '"broker.insecure_workers"' "$tmp/router2.log" && ok insecure-workers-warned ||
    bad insecure-workers-warned "$(head -5 "$tmp/router2.log")"
  second() {  # second KEY -> status
    curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http2/v1/chat/completions" \
      -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
      -d '{"model": "gantry-demo", "max_tokens": 4, "messages": [{"role": "user", "content": "Say hello"}]}'
  }
  s_batch=$(second gantry-demo-batch); batch_body=$(cat "$tmp/body")
  s_dev=$(second gantry-demo-dev)
  [ "$s_batch" = 429 ] && grep -q rate_limited <<<"$batch_body" && [ "$s_dev" = 200 ] &&
    ok rate-limit-shared-between-routers ||
    bad rate-limit-shared-between-routers "batch $s_batch $batch_body; dev $s_dev $(tail -3 "$tmp/router2.log")"
fi

# The worker dies mid-stream: exactly one error event, no [DONE], never a silent 200.
long='{"model": "gantry-demo", "stream": true, "max_tokens": 1600, "messages": [{"role": "user", "content": "a long one"}]}'
curl -sN "http://127.0.0.1:$http/v1/chat/completions" -H "Authorization: Bearer gantry-demo-dev" \
  -H 'Content-Type: application/json' -d "$long" >"$tmp/killed" &
curl_pid=$!
for _ in $(seq 1 100); do grep -q '"content"' "$tmp/killed" 2>/dev/null && break; sleep 0.05; done
kill -9 "$worker"
wait "$curl_pid"
errors=$(grep -c '"error"' "$tmp/killed"); dones=$(grep -c '\[DONE\]' "$tmp/killed")
[ "$errors" = 1 ] && [ "$dones" = 0 ] && grep -q worker_lost "$tmp/killed" && ok worker-killed-mid-stream ||
  bad worker-killed-mid-stream "errors=$errors dones=$dones $(tail -c 400 "$tmp/killed")"

# A new worker registers and the next request is served.
start_worker
for _ in $(seq 1 100); do status=$(chat gantry-demo-dev "$body"); [ "$status" = 200 ] && break; sleep 0.1; done
[ "$status" = 200 ] && ok recovered-after-restart || bad recovered-after-restart "$status $(cat "$tmp/body")"

if [ ${#ledger_args[@]} -gt 0 ]; then
  sleep 0.5
  out=$("$g" ledger verify --db "$ledger_url" --checkpoints "$tmp/spool" 2>&1)
  [ $? = 0 ] && grep -qE '^[1-9][0-9]* streams' <<<"$out" && ok ledger-chains-verify || bad ledger-chains-verify "$out"
  n=$(psql -tA "$ledger_url" -c "select count(*) from ledger_events where type = 'dispatch.sent'")
  [ "${n:-0}" -ge 4 ] && ok ledger-dispatch-events || bad ledger-dispatch-events "dispatch.sent rows: $n"
  reason=$(psql -tA "$ledger_url" -c "select payload_json::json->>'error_reason' from ledger_events where stream_id = '$cancelled_id' and type = 'request.failed'")
  [ "$reason" = cancelled ] && ok ledger-grpc-cancel || bad ledger-grpc-cancel "request.failed of $cancelled_id: '$reason'"
else
  bad ledger "GANTRY_TEST_PG_URL unset: run through tests/run"
fi
finish
