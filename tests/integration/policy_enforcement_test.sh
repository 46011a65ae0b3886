#!/usr/bin/env bash
# Issue 16's reproductions, with real processes over real sockets: gantry-router (HTTP,
# a policy written here) and gantry-worker serving a packed make-test-model bundle with
# the scripted sampler (a test double) forcing the model's tool calls. Each check names
# what main did before the router enforced it. `gantry policy explain` is asked the same
# questions and must name the rule the router names.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

make_test_bundle "$tmp/bundle" 2048 64 || { bad setup "make-test-model / bundle pack"; finish; }
cat >"$tmp/script.yaml" <<'YAML'
- match: "shadow"
  emit: "Reading it.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/etc/shadow\"}}\n</tool_call>"
- match: "dotdot"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/../etc/shadow\"}}\n</tool_call>"
- match: "two files"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/a\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/b\"}}\n</tool_call>"
- match: "cron"
  emit: "Sure. <tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"/etc/cron.d/x\", \"content\": \"pwn\"}}\n</tool_call>"
- match: "one file"
  emit: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/workspace/a\"}}\n</tool_call>"
- match: ""
  emit: "Hello."
YAML
write_models "$tmp/models.json" "$tmp/bundle" 2048 64
cat >"$tmp/policy.yaml" <<YAML
version: 1
defaults:
  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, requests_per_minute: 1000, concurrent_requests: 8}
models:
  - {name: gantry-demo, bundles: [gantry-demo]}
principals:
  users:
    - {name: dana, key_sha256: $(key_sha256 k-dana), priority: interactive}
    - {name: zed, key_sha256: $(key_sha256 k-zed), priority: interactive}
    - {name: tess, key_sha256: $(key_sha256 k-tess), priority: interactive}
    - {name: minnie, key_sha256: $(key_sha256 k-minnie), priority: interactive}
grants:
  - user: dana
    models:
      gantry-demo:
        parallel_tool_calls: {allowed: false, action: clamp}
    tools:
      read_file: {args: {path: {globs: ["/workspace/**"]}}}
      write_file: {}
  - user: dana
    deny:
      tools: [write_file]
  - user: zed
    models: {gantry-demo: {}}
    budgets: {requests_per_minute: 0}
  - user: tess
    models: {gantry-demo: {}}
    budgets: {tokens_per_day: 0}
  - user: minnie
    models:
      gantry-demo:
        max_tokens: {min: 50, action: reject}
YAML
"$g" policy check "$tmp/policy.yaml" >/dev/null 2>&1 && ok policy-check || bad policy-check "$("$g" policy check "$tmp/policy.yaml" 2>&1)"

http=$(free_port)
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }  # plain workers: a 0700 dir
router/gantry-router --listen "127.0.0.1:$http" --workers "$workers" \
  --policy "$tmp/policy.yaml" --models "$tmp/models.json" >"$tmp/router.log" 2>&1 &
pids+=($!)
worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" \
  --script "$tmp/script.yaml" >"$tmp/worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && break; sleep 0.1; done
curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && ok ready || { bad ready "$(tail -5 "$tmp/router.log" "$tmp/worker.log")"; finish; }

# post KEY PATH BODY: the status; headers in $tmp/headers, body in $tmp/body.
post() {
  curl -s -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$http$2" \
    -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d "$3"
}
header() { grep -i "^$1:" "$tmp/headers" | cut -d' ' -f2- | tr -d '\r'; }
explain_rule() { "$g" policy explain "$tmp/policy.yaml" "$@" --default-max-tokens 64 | sed -n 's/^rule: //p'; }
tool() { printf '{"type":"function","function":{"name":"%s","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}' "$1"; }
chat() {  # chat CONTENT [EXTRA]: a chat body offering read_file
  printf '{"model":"gantry-demo","messages":[{"role":"user","content":"%s"}],"tools":[%s]%s}' "$1" "$(tool read_file)" "${2:-}"
}

# 1. Budgets of 0. Before: 0 meant "no limit" and both were admitted (200).
status=$(post k-zed /v1/chat/completions '{"model":"gantry-demo","messages":[{"role":"user","content":"hi"}]}')
[ "$status" = 429 ] && grep -q '"code":"rate_limited"' "$tmp/body" && ok zero-requests-per-minute-429 ||
  bad zero-requests-per-minute-429 "$status $(cat "$tmp/body")"
status=$(post k-tess /v1/chat/completions '{"model":"gantry-demo","messages":[{"role":"user","content":"hi"}]}')
[ "$status" = 429 ] && grep -q '"code":"budget_exhausted"' "$tmp/body" && ok zero-tokens-per-day-429 ||
  bad zero-tokens-per-day-429 "$status $(cat "$tmp/body")"

# 2. An offered tool that explain denies. Before: admitted with plain allow, it reached
# the model. Now stripped (the default), with the rule explain names.
status=$(post k-dana /v1/chat/completions "$(printf '{"model":"gantry-demo","messages":[{"role":"user","content":"hi"}],"tools":[%s,%s]}' "$(tool read_file)" "$(tool write_file)")")
explained=$("$g" policy explain "$tmp/policy.yaml" --user dana --model gantry-demo --offer-tool read_file --offer-tool write_file)
[ "$status" = 200 ] && [ "$(header x-gantry-tools-stripped)" = write_file ] &&
  grep -q '^offered tool: write_file not granted (grants\[1\].deny.tools\[0\])$' <<<"$explained" &&
  ok offered-denied-tool-stripped || bad offered-denied-tool-stripped "$status [$(header x-gantry-tools-stripped)] $explained"

# 2b. The model writes a call of the stripped tool anyway. Before (red team): with no
# tool left on the request the call went out as plain text, which some clients parse
# and run. Now it is not an offered tool: 422 invalid_tool_call, nothing of it sent.
status=$(post k-dana /v1/chat/completions "$(printf '{"model":"gantry-demo","messages":[{"role":"user","content":"add a cron job"}],"tools":[%s]}' "$(tool write_file)")")
[ "$status" = 422 ] && grep -q '"code":"invalid_tool_call"' "$tmp/body" && ! grep -q 'cron.d' "$tmp/body" &&
  [ "$(header x-gantry-tools-stripped)" = write_file ] &&
  ok stripped-tool-called-as-text-refused || bad stripped-tool-called-as-text-refused "$status $(cat "$tmp/body")"

# 3. A model call outside its argument constraint. Before: it reached the client,
# streamed and not. Now one tool_call_denied error with the rule; the path never shown.
want_rule=$(explain_rule --user dana --tool read_file --args '{"path":"/etc/shadow"}')
status=$(post k-dana /v1/chat/completions "$(chat 'read the shadow file')")
[ "$status" = 403 ] && grep -q '"code":"tool_call_denied"' "$tmp/body" && grep -qF "rule $want_rule " "$tmp/body" &&
  ! grep -q shadow "$tmp/body" && [ "$want_rule" = grants[0].tools.read_file.args.path ] &&
  ok denied-call-non-streamed || bad denied-call-non-streamed "$status $want_rule $(cat "$tmp/body")"
status=$(post k-dana /v1/chat/completions "$(chat 'read the shadow file' ',"stream":true')")
[ "$status" = 200 ] && grep -q '"code":"tool_call_denied"' "$tmp/body" && ! grep -q tool_calls "$tmp/body" &&
  ! grep -q '\[DONE\]' "$tmp/body" && ! grep -q '/etc' "$tmp/body" &&
  ok denied-call-streamed || bad denied-call-streamed "$status $(cat "$tmp/body")"
status=$(post k-dana /v1/responses "$(printf '{"model":"gantry-demo","input":"read the shadow file","tools":[{"type":"function","name":"read_file","parameters":{"type":"object"}}]}')")
[ "$status" = 403 ] && grep -q '"code":"tool_call_denied"' "$tmp/body" &&
  ok denied-call-responses || bad denied-call-responses "$status $(cat "$tmp/body")"
status=$(post k-dana /v1/chat/completions "$(chat 'dotdot')")
[ "$status" = 403 ] && grep -q '"code":"tool_call_denied"' "$tmp/body" &&
  ok denied-call-dotdot || bad denied-call-dotdot "$status $(cat "$tmp/body")"
status=$(post k-dana /v1/chat/completions "$(chat 'read one file')")
[ "$status" = 200 ] && grep -q '"finish_reason":"tool_calls"' "$tmp/body" && grep -q 'workspace/a' "$tmp/body" &&
  ok allowed-call || bad allowed-call "$status $(cat "$tmp/body")"

# 4. parallel_tool_calls omitted under {allowed: false}. Before: not checked, the worker
# took it as true and both calls reached the client. Now decided as true, clamped to
# false and sent: the worker refuses the second call.
status=$(post k-dana /v1/chat/completions "$(chat 'read two files')")
[ "$status" = 422 ] && grep -q '"code":"too_many_tool_calls"' "$tmp/body" &&
  [ "$(header x-gantry-policy-rule)" = grants[0].models.gantry-demo.parallel_tool_calls ] &&
  [ "$(explain_rule --user dana --model gantry-demo --offer-tool read_file)" = grants[0].models.gantry-demo.parallel_tool_calls ] &&
  ok omitted-parallel-tool-calls-decided || bad omitted-parallel-tool-calls-decided "$status [$(header x-gantry-policy-rule)] $(cat "$tmp/body")"

# 5. chat_template_kwargs. Before: passed unbounded. Now refused unless granted.
status=$(post k-dana /v1/chat/completions "$(chat hi ',"chat_template_kwargs":{"enable_thinking":true}')")
[ "$status" = 403 ] && grep -q parameter_not_granted "$tmp/body" && ok template-kwarg-not-granted ||
  bad template-kwarg-not-granted "$status $(cat "$tmp/body")"

# 6. An output cap lowered by the room the prompt leaves is decided again. Before (red
# team): a grant's min of 50 was undercut (23 sent). The bundle: context 2048, default
# output 64; about 2,000 prompt tokens leave less than 50.
long=$(printf ' word%.0s' $(seq 1 1995))
status=$(post k-minnie /v1/chat/completions "{\"model\":\"gantry-demo\",\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}")
[ "$status" = 403 ] && grep -q 'grants\[4\].models.gantry-demo.max_tokens' "$tmp/body" && grep -q 'leaves room for' "$tmp/body" &&
  ok lowered-output-cap-decided || bad lowered-output-cap-decided "$status $(head -c 600 "$tmp/body")"
status=$(post k-minnie /v1/chat/completions '{"model":"gantry-demo","messages":[{"role":"user","content":"hi"}]}')
[ "$status" = 200 ] && ok roomy-output-cap-admitted || bad roomy-output-cap-admitted "$status $(cat "$tmp/body")"

finish
