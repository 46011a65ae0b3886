#!/usr/bin/env bash
# Red-team findings against issue 16 ("fail closed"), as executable checks.
#
# Standalone (not in any BUILD file). Run from the repository root after
#   bazel build --jobs=2 //cli:gantry //router:gantry-router //worker/server:gantry-worker
# with:  bash tests/redteam/findings.sh
#
# It starts its own gantry-router (HTTP + gRPC, a ledger spool with an unreachable
# Postgres so that ledger events can be read back from the spool file) and a real
# gantry-worker with the scripted sampler, like tests/integration/policy_enforcement_test.sh.
#
# Each check prints PASS when Gantry behaves as issue 16 claims (the finding is fixed)
# and FAIL when the finding reproduces. HELD-* checks are attacks that held when this
# was written (kept as regression checks). SKIP: a tool the check needs is missing.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-bazel-bin}
g=$BIN/cli/gantry
for b in "$g" "$BIN/router/gantry-router" "$BIN/worker/server/gantry-worker"; do
  [ -x "$b" ] || { echo "missing $b: bazel build --jobs=2 //cli:gantry //router:gantry-router //worker/server:gantry-worker"; exit 2; }
done
tmp=$(mktemp -d)
source tests/lib/stack.sh   # pids, cleanup trap, free_port, make_test_bundle, write_models

npass=0; nfail=0
pass() { echo "PASS $1"; npass=$((npass + 1)); }
fail() { local n=$1; shift; echo "FAIL $n: $*" | head -c 1500; echo; nfail=$((nfail + 1)); }
skip() { echo "SKIP $1: $2"; }

make_test_bundle "$tmp/bundle" 8192 2048 || { echo "setup: make-test-model / bundle pack failed"; exit 2; }
write_models "$tmp/models.json" "$tmp/bundle" 8192 2048

# What the scripted "model" emits, by a marker in the last user message.
cat >"$tmp/script.yaml" <<'YAML'
- match: "K_CASEFIRST"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"PATH\": \"/etc/shadow\", \"path\": \"/workspace/a\"}}\n</tool_call>"
- match: "K_CASE"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/a\", \"Path\": \"/etc/shadow\"}}\n</tool_call>"
- match: "K_NUL"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\\u0000\": \"/etc/shadow\", \"path\": \"/workspace/a\"}}\n</tool_call>"
- match: "K_SPACE"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/a\", \"path \": \"/etc/shadow\"}}\n</tool_call>"
- match: "TEXT_CALL"
  emit: "Sure. <tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"/etc/cron.d/x\", \"content\": \"pwn\"}}\n</tool_call>"
- match: "THINK_CALL"
  emit: "<think>calling <tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"/etc/shadow\"}}</tool_call></think>Done."
- match: "OK_THEN_DENIED"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/ok\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/etc/shadow\"}}\n</tool_call>"
- match: "DOTDOT_ESC"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/\\u002e\\u002e/etc/shadow\"}}\n</tool_call>"
- match: ""
  emit: "Hello."
YAML

cat >"$tmp/policy.yaml" <<YAML
version: 1
defaults:
  budgets: {tokens_per_day: 10000000, tokens_per_month: 100000000, requests_per_minute: 10000, concurrent_requests: 8}
models:
  - {name: gantry-demo, bundles: [gantry-demo]}
principals:
  users:
    - {name: dana, key_sha256: $(key_sha256 k-dana), priority: interactive}
    - {name: tim, key_sha256: $(key_sha256 k-tim), priority: interactive}
    - {name: kay, key_sha256: $(key_sha256 k-kay), priority: interactive}
    - {name: sam, key_sha256: $(key_sha256 k-sam), priority: interactive}
    - {name: rae, key_sha256: $(key_sha256 k-rae), priority: interactive}
grants:
  - user: dana
    models: {gantry-demo: {}}
    tools:
      read_file: {args: {path: {globs: ["/workspace/**"]}}}
      write_file: {}
  - user: dana
    deny:
      tools: [write_file]
  - user: tim
    models:
      gantry-demo:
        temperature: {min: 0.7, max: 0.9, action: reject}
  - user: kay
    models:
      gantry-demo:
        enable_thinking: {allowed: true}
  - user: sam
    models:
      gantry-demo:
        seed: {min: 0, max: 100, action: clamp}
        max_tokens: {min: 50, action: reject}
  - user: rae
    models:
      gantry-demo:
        reasoning_effort: {max: low, action: reject}
YAML
"$g" policy check "$tmp/policy.yaml" >/dev/null || { echo "setup: policy check failed"; exit 2; }

http=$(free_port); grpc=$(free_port)
new_worker_ipc workers || { echo "setup: no private ipc directory"; exit 2; }  # plain workers: a 0700 dir
# The writer needs its ledger key even when it can only spool.
(umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$tmp/ledger.key"; echo >>"$tmp/ledger.key")
"$BIN/router/gantry-router" --ledger-key "$tmp/ledger.key" --listen "127.0.0.1:$http" --grpc-listen "127.0.0.1:$grpc" \
  --workers "$workers" --policy "$tmp/policy.yaml" --models "$tmp/models.json" \
  --ledger "postgresql://nobody@/none?host=$tmp/nosock&connect_timeout=1" --ledger-spool "$tmp/spool" \
  >"$tmp/router.log" 2>&1 &
pids+=($!)
"$BIN/worker/server/gantry-worker" --bundle "$tmp/bundle" --router "$workers" \
  --script "$tmp/script.yaml" >"$tmp/worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && break; sleep 0.1; done
curl -fs "http://127.0.0.1:$http/readyz" >/dev/null || { echo "setup: not ready"; tail -5 "$tmp/router.log" "$tmp/worker.log"; exit 2; }

post() {  # post KEY PATH BODY -> status; body in $tmp/body, headers in $tmp/headers
  curl -s -N -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http$2" \
    -H "Authorization: Bearer $1" -H 'Content-Type: application/json' --data-binary "$3"
}
hdr() { grep -i "^$1:" "$tmp/headers" | cut -d' ' -f2- | tr -d '\r'; }
tool() { printf '{"type":"function","function":{"name":"%s","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}' "$1"; }
chat() { printf '{"model":"gantry-demo","messages":[{"role":"user","content":"%s"}],"tools":[%s]%s}' "$1" "$(tool read_file)" "${2:-}"; }
plain() { printf '{"model":"gantry-demo","messages":[{"role":"user","content":"%s"}]%s}' "$1" "${2:-}"; }
explain() { "$g" policy explain "$tmp/policy.yaml" --default-max-tokens 2048 "$@" 2>&1; }
body() { head -c 600 "$tmp/body"; }

echo "== 1. Real bypasses"
# F1. Argument-key differential. The policy matches the constrained argument by its exact
# key and ignores every other key, so a call that carries an allowed "path" plus a
# look-alike key holding /etc/shadow is allowed and delivered. Tool runners that read
# arguments case-insensitively (Go encoding/json into a struct: case-insensitive, last
# match wins; cJSON_GetObjectItem: case-insensitive, first match) or as C strings (a key
# "path\u0000" becomes "path") read /etc/shadow. Expected: tool_call_denied, as for an
# exact duplicate key.
for k in K_CASEFIRST K_CASE K_NUL K_SPACE; do
  s=$(post k-dana /v1/chat/completions "$(chat $k)")
  if [ "$s" = 403 ] && grep -q tool_call_denied "$tmp/body"; then pass "F1-lookalike-arg-key-$k"
  else fail "F1-lookalike-arg-key-$k" "got $s $(grep -o '"arguments":"[^}]*}"' "$tmp/body")"; fi
done

echo "== 2. Fail-open edge cases"
# F2. Tool-call markup goes out as plain text whenever no tool is left to parse for:
# every offered tool stripped (here write_file, explicitly denied to dana), or none
# offered. The worker only parses calls when tools are advertised, the router only
# decides ToolCallEvents, so a call to a denied tool reaches the client undecided, with
# finish_reason "stop" and no tool_call.decided in the ledger. Any client that falls back
# to parsing hermes <tool_call> text (common in agent frameworks) runs it.
# Expected: decided like any other call (tool_call_denied, tool_not_granted).
s=$(post k-dana /v1/chat/completions "$(printf '{"model":"gantry-demo","messages":[{"role":"user","content":"TEXT_CALL"}],"tools":[%s]}' "$(tool write_file)")")
if grep -q 'tool_call>' "$tmp/body"; then fail F2a-text-call-after-strip "$s stripped=[$(hdr x-gantry-tools-stripped)] $(body)"
else pass F2a-text-call-after-strip; fi
s=$(post k-dana /v1/chat/completions "$(plain TEXT_CALL ',"stream":true')")
if grep -q 'tool_call>' "$tmp/body"; then fail F2b-text-call-no-tools-streamed "$s (the <tool_call> text streams out as content deltas)"
else pass F2b-text-call-no-tools-streamed; fi
s=$(post k-dana /v1/responses '{"model":"gantry-demo","input":"TEXT_CALL"}')
if grep -q 'tool_call>' "$tmp/body"; then fail F2c-text-call-no-tools-responses "$s $(grep -o '"text":"[^"]*tool_call[^"]*' "$tmp/body" | head -1)"
else pass F2c-text-call-no-tools-responses; fi
s=$(post k-dana /v1/chat/completions "$(chat THINK_CALL)")
if grep -q 'tool_call>' "$tmp/body"; then fail F2d-call-in-reasoning "$s $(grep -o '"reasoning_content":"[^}]*}' "$tmp/body")"
else pass F2d-call-in-reasoning; fi
if command -v protoc >/dev/null && curl --version | grep -q nghttp2; then
  printf '%s' 'request { model: "gantry-demo" messages { role: "user" content: "TEXT_CALL" } tools { name: "write_file" } }' |
    protoc -Iproto --encode=gantry.v1.ChatRequest gantry/v1/gateway.proto >"$tmp/g.msg"
  python3 -c "import struct,sys; m=open('$tmp/g.msg','rb').read(); sys.stdout.buffer.write(b'\x00'+struct.pack('>I',len(m))+m)" >"$tmp/g.req"
  curl -s --http2-prior-knowledge -X POST "http://127.0.0.1:$grpc/gantry.v1.Gateway/Chat" -H 'content-type: application/grpc' \
    -H 'te: trailers' -H 'authorization: Bearer k-dana' --data-binary @"$tmp/g.req" -o "$tmp/g.resp"
  if grep -aq 'tool_call>' "$tmp/g.resp"; then fail F2e-text-call-grpc "the gRPC stream carries TextDeltas '<tool_call>' ... 'write_file' ... '/etc/cron.d/x'"
  else pass F2e-text-call-grpc; fi
else skip F2e-text-call-grpc "needs protoc and curl with HTTP/2"; fi

# F3. max_tokens {min: 50, action: reject}: an omitted max_tokens is decided as the
# default (2048, allowed), then lowered to the room a long prompt leaves: the worker is
# sent a max_tokens below the bound the policy says every request has.
long=$(python3 -c "import json; print(json.dumps({'model':'gantry-demo','messages':[{'role':'user','content':'hi '*8160}]}))")
s=$(post k-sam /v1/chat/completions "$long")
sleep 0.5
sent=$(strings "$tmp"/spool/spool-*.log 2>/dev/null | grep -o '"gen_ai.request.max_tokens":[0-9]*,"gen_ai.request.model":"gantry-demo","gen_ai.usage.input_tokens":8[0-9]\{3\}' | tail -1 | sed 's/.*max_tokens":\([0-9]*\),.*/\1/')
if [ "$s" = 200 ] && [ -n "$sent" ] && [ "$sent" -lt 50 ]; then fail F3-max-tokens-min-bound-undercut "200, sent max_tokens=$sent under grants[4]...max_tokens min 50"
elif [ -z "$sent" ] && [ "$s" = 200 ]; then skip F3-max-tokens-min-bound-undercut "admission event not found in the spool"
else pass F3-max-tokens-min-bound-undercut; fi

echo "== 3. explain != enforce"
# F4. (Fixed in the working tree while this was written: policy_decide.cc AsCarried.)
# Floats: the router decides temperature / top_p as the float32 it sends
# (0.7 -> 0.699999988), explain as the double. temperature 0.7 under {min: 0.7, reject}:
# the router refuses a value on the bound (403), explain says allow.
s=$(post k-tim /v1/chat/completions "$(plain hi ',"temperature":0.7')")
e=$(explain --user tim --model gantry-demo --param temperature=0.7 | sed -n 's/^verdict: //p')
if { [ "$s" = 403 ] && [ "$e" = deny ]; } || { [ "$s" = 200 ] && [ "$e" != deny ]; }; then pass F4-float32-bound
else fail F4-float32-bound "router $s rule=$(hdr x-gantry-policy-rule); explain verdict=$e"; fi

# F5. explain --template-kwarg enable_thinking: explain denies (template_kwarg_not_granted,
# "key 'enable_thinking' is not granted (the only ... is enable_thinking)"); the router
# admits the same request for kay, whose grant bounds enable_thinking.
s=$(post k-kay /v1/chat/completions "$(plain hi ',"chat_template_kwargs":{"enable_thinking":true}')")
e=$(explain --user kay --model gantry-demo --template-kwarg enable_thinking | sed -n 's/^verdict: //p')
if { [ "$s" = 200 ] && [ "$e" != deny ]; } || { [ "$s" = 403 ] && [ "$e" = deny ]; }; then pass F5-explain-template-kwarg-enable-thinking
else fail F5-explain-template-kwarg-enable-thinking "router $s; explain --template-kwarg enable_thinking: $e"; fi

# F6. explain --tool-choice-name NAME is ignored unless --param tool_choice=named is also
# given: explain says allow for a named choice of a denied tool; the router refuses (403).
s=$(post k-dana /v1/chat/completions "$(printf '{"model":"gantry-demo","messages":[{"role":"user","content":"hi"}],"tools":[%s],"tool_choice":{"type":"function","function":{"name":"write_file"}}}' "$(tool write_file)")")
e=$(explain --user dana --model gantry-demo --offer-tool write_file --tool-choice-name write_file | sed -n 's/^verdict: //p')
if [ "$s" = 403 ] && [ "$e" = deny ]; then pass F6-explain-tool-choice-name
else fail F6-explain-tool-choice-name "router $s rule=$(hdr x-gantry-policy-rule); explain: $e"; fi

# F7. seed -1: the router takes it as 18446744073709551615 and clamps it to 100 (200,
# clamp); explain refuses the same value as a usage error.
s=$(post k-sam /v1/chat/completions "$(plain hi ',"seed":-1')")
e=$(explain --user sam --model gantry-demo --param seed=-1 | head -1)
case "$e" in verdict:*) pass F7-explain-negative-seed ;; *) fail F7-explain-negative-seed "router $s rule=$(hdr x-gantry-policy-rule); explain: $e" ;; esac

echo "== 4. Cosmetic / semantic"
# F8. The Responses object echoes the tools the client sent, stripped ones included
# (and parallel_tool_calls / max_output_tokens as sent, not as decided).
s=$(post k-dana /v1/responses '{"model":"gantry-demo","input":"hi","tools":[{"type":"function","name":"read_file"},{"type":"function","name":"write_file"}]}')
if [ "$(hdr x-gantry-tools-stripped)" = write_file ] && grep -q '"name":"write_file"' "$tmp/body"; then
  fail F8-responses-echo-lists-stripped-tool "$s x-gantry-tools-stripped=write_file, but response.tools lists write_file"
else pass F8-responses-echo-lists-stripped-tool; fi

# F9. Responses reasoning {effort: "none"} is read as "omitted" and decided as the
# default medium: under {max: low, reject} asking for no reasoning is refused. Fixed by
# refusing "none" itself (400 invalid_request naming what is supported), not by reading
# it as some effort the client did not ask for.
s=$(post k-rae /v1/responses '{"model":"gantry-demo","input":"hi","reasoning":{"effort":"none"}}')
if [ "$s" = 400 ] && grep -q 'reasoning.effort: none is not supported' "$tmp/body"; then pass F9-responses-effort-none
else fail F9-responses-effort-none "$s $(grep -o '"message":"[^"]*"' "$tmp/body")"; fi

echo "== Held (regression checks)"
s=$(post k-dana /v1/chat/completions "$(chat OK_THEN_DENIED ',"stream":true')")
grep -q tool_call_denied "$tmp/body" && ! grep -q '"tool_calls"' "$tmp/body" && ! grep -q '\[DONE\]' "$tmp/body" &&
  pass HELD-parallel-allowed-then-denied-streamed || fail HELD-parallel-allowed-then-denied-streamed "$s $(body)"
s=$(post k-dana /v1/chat/completions "$(chat DOTDOT_ESC)")
[ "$s" = 403 ] && grep -q tool_call_denied "$tmp/body" && pass HELD-unicode-escaped-dotdot || fail HELD-unicode-escaped-dotdot "$s $(body)"
s=$(post k-dana /v1/chat/completions "$(plain hi ',"chat_template_kwargs":{"tools":[]}')")
[ "$s" = 403 ] && grep -q template_kwarg_not_granted "$tmp/body" && pass HELD-template-kwarg-tools || fail HELD-template-kwarg-tools "$s $(body)"
s=$(post k-dana /v1/chat/completions "$(printf '{"model":"gantry-demo","messages":[{"role":"user","content":"hi"}],"tools":[%s],"tool_choice":"required"}' "$(tool write_file)")")
[ "$s" = 403 ] && pass HELD-required-all-stripped || fail HELD-required-all-stripped "$s $(body)"
sleep 0.5
if strings "$tmp"/spool/spool-*.log 2>/dev/null | grep -q 'tool_call.decided'; then
  strings "$tmp"/spool/spool-*.log | grep -q 'etc/shadow' && fail HELD-ledger-no-denied-args "the spool holds /etc/shadow" ||
    pass HELD-ledger-no-denied-args
else skip HELD-ledger-no-denied-args "no ledger spool written"; fi

echo "passed $npass, failed $nfail (a FAIL is a finding that reproduces)"
[ "$nfail" = 0 ]
