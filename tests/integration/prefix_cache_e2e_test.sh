#!/usr/bin/env bash
# Issue 19's prefix reuse through the whole path: gantry-router and two real
# gantry-workers with four slots each (the scripted sampler, a test double, forces the
# text; the forward pass and the KV pool are the real ones). Before the paged pool, a
# worker with several slots served every turn cold (cached_tokens 1 on the next turn).
# Checks: a conversation's second turn reuses its first turn's prefix (the router sends
# it to the worker that served the first: gantry_router_dispatched_by_prefix_total); the
# same conversation from another principal reuses nothing; /metrics shows each
# worker's KV pool (worker one's F16, two's Q8_0: --kv-cache-type); a cache type the
# worker does not know is refused at start.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

make_test_bundle "$tmp/bundle" 2048 64 32 || { bad setup "make-test-model / bundle pack"; finish; }
cat >"$tmp/script.yaml" <<'YAML'
- match: ""
  emit: "Looked at it; the parser drops the last token."
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
grants:
  - user: dana
    models: {gantry-demo: {}}
  - user: zed
    models: {gantry-demo: {}}
YAML
http=$(free_port)
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }
router/gantry-router --listen "127.0.0.1:$http" --workers "$workers" \
  --policy "$tmp/policy.yaml" --models "$tmp/models.json" >"$tmp/router.log" 2>&1 &
pids+=($!)
# Worker one keeps its cache as F16 (the default), two as Q8_0.
for w in one two; do
  kv=f16
  [ "$w" = two ] && kv=q8_0
  worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" --slots 4 --threads 1 \
    --kv-cache-type "$kv" --worker-id "host/$w" --script "$tmp/script.yaml" >"$tmp/worker-$w.log" 2>&1 &
  pids+=($!)
done
live() { curl -fs "http://127.0.0.1:$http/metrics" | grep -q '^gantry_router_live_workers 2$'; }
for _ in $(seq 1 150); do live && break; sleep 0.1; done
live && ok two-workers-live || { bad two-workers-live "$(tail -n 5 "$tmp/router.log" "$tmp"/worker-*.log)"; finish; }

# turn KEY TASK N: the conversation's turn N (1 or 2); prints cached_tokens and prompt_tokens.
turn() {
  python3 - "$http" "$1" "$2" "$3" <<'PY'
import json, sys, urllib.request
port, key, task, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
system = "You are a coding agent working in a repository. " + " ".join(f"rule {i}: be careful." for i in range(40))
messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
if n == 2:
    messages += [{"role": "assistant", "content": "Looked at it; the parser drops the last token."},
                 {"role": "user", "content": "Fix it and run the tests."}]
body = json.dumps({"model": "gantry-demo", "messages": messages, "max_tokens": 16}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                             {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
usage = json.load(urllib.request.urlopen(req))["usage"]
print(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"])
PY
}
# Three conversations interleaved, so that each worker serves some.
for t in parser lexer docs; do turn k-dana "Fix the $t." 1 >"$tmp/$t.1" || bad "turn1-$t" "$(cat "$tmp/$t.1")"; done
read -r first_cached _ <"$tmp/parser.1"
[ "$first_cached" = 0 ] && ok first-turn-is-cold || bad first-turn-is-cold "$first_cached"
for t in parser lexer docs; do
  turn k-dana "Fix the $t." 2 >"$tmp/$t.2" || { bad "turn2-$t" "$(cat "$tmp/$t.2")"; continue; }
  read -r cached prompt <"$tmp/$t.2"
  read -r cached1 prompt1 <"$tmp/$t.1"
  # The first turn's prompt is a prefix of the second's: all of it is reused, more than
  # the first turn itself found (the system prompt another task of dana's left).
  [ "$cached" -ge $((prompt1 - 1)) ] && [ "$cached" -gt "$cached1" ] && [ "$cached" -lt "$prompt" ] &&
    ok "turn2-reuses-turn1-$t" || bad "turn2-reuses-turn1-$t" "turn 1: $cached1 of $prompt1, turn 2: $cached of $prompt"
done
read -r zed_cached zed_prompt < <(turn k-zed "Fix the parser." 2)
[ "${zed_cached:-x}" = 0 ] && ok another-principal-reuses-nothing || bad another-principal-reuses-nothing "$zed_cached of $zed_prompt"
metrics=$(curl -fs "http://127.0.0.1:$http/metrics")
by_prefix=$(printf '%s\n' "$metrics" | sed -n 's/^gantry_router_dispatched_by_prefix_total //p')
[ "${by_prefix:-0}" -ge 3 ] && ok turn2-went-to-the-first-turns-worker || bad turn2-went-to-the-first-turns-worker "$by_prefix"
for w in one two; do
  printf '%s\n' "$metrics" | grep -q "^gantry_worker_kv_cache_usage_perc{model=\"gantry-demo\",worker_id=\"host/$w\"} " &&
    printf '%s\n' "$metrics" | grep -q "^gantry_worker_kv_cache_blocks{model=\"gantry-demo\",worker_id=\"host/$w\"} 260$" &&
    ok "kv-metrics-$w" || bad "kv-metrics-$w" "$(printf '%s\n' "$metrics" | grep gantry_worker_kv)"
done
# The same blocks in 34/64 of the bytes.
f16_bytes=$(printf '%s\n' "$metrics" | sed -n 's/^gantry_worker_kv_cache_bytes{model="gantry-demo",worker_id="host\/one",type="f16"} //p')
q8_bytes=$(printf '%s\n' "$metrics" | sed -n 's/^gantry_worker_kv_cache_bytes{model="gantry-demo",worker_id="host\/two",type="q8_0"} //p')
[ -n "$f16_bytes" ] && [ -n "$q8_bytes" ] && [ $((q8_bytes * 64)) -eq $((f16_bytes * 34)) ] &&
  ok kv-cache-types || bad kv-cache-types "f16 ${f16_bytes:-none}, q8_0 ${q8_bytes:-none}"
# A cache type the worker does not know is refused at start, with the reason.
if worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" --kv-cache-type q4_0 >"$tmp/bad.log" 2>&1; then
  bad unknown-kv-cache-type-refused "started"
else
  grep -q "bad option --kv-cache-type q4_0" "$tmp/bad.log" && ok unknown-kv-cache-type-refused ||
    bad unknown-kv-cache-type-refused "$(cat "$tmp/bad.log")"
fi
finish
