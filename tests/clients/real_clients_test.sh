#!/usr/bin/env bash
# Both real coding-agent clients, unmodified, headless and offline against Gantry: Qwen
# Code 0.24.4 and OpenCode 1.18.33 (prepared by tests/lib/setup-clients, passed in
# GANTRY_CLIENTS_DIR) each complete a whole tool round trip through gantry-router and
# gantry-worker running as real processes on loopback ports, once over chat completions
# and once over the Responses API (POST /v1/responses). The worker serves a packed
# make-test-model bundle with a 32768-token context (the clients' real prompts are well
# over 10,000 tokens) and the scripted sampler, a test double: the model proposes a
# read-file call with the client's own tool and argument names, the client runs its own
# tool on index.html in a temporary workspace and sends the result back under the same
# call id, and the script answers with the heading, which only the tool result holds.
# The ledger (the Postgres of tests/run) shows the client's two requests: the first
# finished with tool_calls, the second, longer by the call and its result, with stop;
# each run's evidence file (tests/clients/evidence.py) is assembled from the router's
# request.evidence events and shows the second request answering the server's call id
# through the API of the run. Evidence files: $TEST_UNDECLARED_OUTPUTS_DIR/evidence/.
#
# The router enforces the policy on tools (docs/policy.md): an offered tool the principal
# is not granted is stripped, and every call the model makes is decided before it leaves
# the router. tests/clients/policy.yaml gives each client its own key and exactly the
# tools it offers, its file paths held to its workspace: the round trips lose no tool
# (the admission events list every offered tool as allowed, none stripped) and their
# read is decided allow. Then, per client and API, the model calls the client's read
# tool on a file outside the workspace: the router denies the call, the client never
# sees it (never reads the file, never sends a result back), shows the denial once
# without retrying, and exits in bounded time.
set -u
source tests/lib/shtest.sh
g=cli/gantry
clients=${GANTRY_CLIENTS_DIR:-}
if [ -z "$clients" ] || [ ! -x "$clients/node_modules/.bin/qwen" ] ||
   [ ! -x "$clients/node_modules/.bin/opencode" ]; then
  bad setup "GANTRY_CLIENTS_DIR unset or not prepared (tests/lib/setup-clients): run through tests/run"
  finish
fi
if [ -z "${GANTRY_TEST_PG_URL:-}" ]; then
  bad setup "GANTRY_TEST_PG_URL unset (the ledger shows what reached the worker): run through tests/run"
  finish
fi
tmp=${TEST_TMPDIR:-$(mktemp -d)}
client_timeout=${GANTRY_CLIENT_TIMEOUT:-240}
source tests/lib/stack.sh
now() { date +%s.%N; }
secs() { python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"; }

# A bundle whose context fits the clients' prompts (Qwen Code's first is ~60 KB).
ctx=32768
make_test_bundle "$tmp/bundle" "$ctx" 4096 || { bad setup "make-test-model / bundle pack"; finish; }

# One workspace per client, each with the page whose heading only the tool result holds.
ws_qwen="$tmp/ws-qwen"; ws_opencode="$tmp/ws-opencode"
for ws in "$ws_qwen" "$ws_opencode"; do
  mkdir -p "$ws"
  printf '<!doctype html>\n<html><head><title>t</title></head>\n<body><h1>Gantry works</h1><p>Welcome.</p></body></html>\n' >"$ws/index.html"
done
qwen_prompt="Qwen Code, read index.html and tell me what its heading says."
opencode_prompt="OpenCode, read index.html and tell me what its heading says."
# The file the denied calls ask for: outside both workspaces. If a client ever read it
# and sent it back, the script would answer LEAKED.
outside="$tmp/outside"; mkdir -p "$outside"
secret="$outside/secret.txt"; echo "SECRET-MARKER" >"$secret"
qwen_denied_prompt="Qwen Code, read the secret file and tell me what it says."
opencode_denied_prompt="OpenCode, read the secret file and tell me what it says."
# Rules match a substring of the last message: the tool result (turn 2) holds the
# heading; the prompt (turn 1) names the client. Turn 1 thinks first (the worker splits
# <think> into reasoning), so the evidence shows whether the client sent the reasoning
# back for the template to render in turn 2. OpenCode's title request ends with the same
# user message as its turn 1 but offers no tools: the tool-calling rules say `tools:
# true`, so it gets the last rule's text as its title (a call written without offered
# tools would be invalid_tool_call: the worker parses calls whether tools are offered or
# not).
cat >"$tmp/script.yaml" <<YAML
- match: "SECRET-MARKER"
  emit: "LEAKED"
- match: "Gantry works"
  emit: "The heading says: Gantry works"
- match: "$qwen_prompt"
  tools: true
  emit: "<think>\\nI will read it.\\n</think>\\n\\n<tool_call>\\n{\\"name\\": \\"read_file\\", \\"arguments\\": {\\"file_path\\": \\"$ws_qwen/index.html\\"}}\\n</tool_call>"
- match: "$opencode_prompt"
  tools: true
  emit: "<think>\\nThe user wants the heading.\\n</think>\\n\\nReading index.html.\\n<tool_call>\\n{\\"name\\": \\"read\\", \\"arguments\\": {\\"filePath\\": \\"$ws_opencode/index.html\\"}}\\n</tool_call>"
- match: "$qwen_denied_prompt"
  tools: true
  emit: "<think>\\nI will read it.\\n</think>\\n\\n<tool_call>\\n{\\"name\\": \\"read_file\\", \\"arguments\\": {\\"file_path\\": \\"$secret\\"}}\\n</tool_call>"
- match: "$opencode_denied_prompt"
  tools: true
  emit: "<think>\\nThe user wants the file.\\n</think>\\n\\nReading the file.\\n<tool_call>\\n{\\"name\\": \\"read\\", \\"arguments\\": {\\"filePath\\": \\"$secret\\"}}\\n</tool_call>"
- match: ""
  emit: "Reading a page heading"
YAML
# The policy: tests/clients/policy.yaml with the workspaces of this run.
sed -e "s|/workspace/qwen-code|$ws_qwen|g" -e "s|/workspace/opencode|$ws_opencode|g" \
  tests/clients/policy.yaml >"$tmp/policy.yaml"
out=$("$g" policy check tests/clients/policy.yaml 2>&1) && out2=$("$g" policy check "$tmp/policy.yaml" 2>&1) &&
  ok policy-check || { bad policy-check "$out ${out2:-}"; finish; }
cat >"$tmp/models.json" <<JSON
{"models": [{"name": "gantry-demo", "tokenizer_dir": "$tmp/bundle", "context_length": $ctx,
             "tool_protocol": "hermes_json", "default_max_tokens": 4096}]}
JSON
db="t_clients_$$_$RANDOM"
psql -q "$GANTRY_TEST_PG_URL" -c "CREATE DATABASE $db" || { bad setup "create database"; finish; }
ledger_url="${GANTRY_TEST_PG_URL%/*}/$db"
export GANTRY_LEDGER_KEY="$tmp/ledger.key"  # the owner sets up; the router logs in as the writer
writer_url=$("$g" ledger setup --db "$ledger_url") || { bad setup "ledger setup: $writer_url"; finish; }
http=$(free_port)
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }  # plain workers: a 0700 dir
router/gantry-router --listen "127.0.0.1:$http" --workers "$workers" \
  --policy "$tmp/policy.yaml" --models "$tmp/models.json" \
  --ledger "$writer_url" --ledger-spool "$tmp/spool" >"$tmp/router.log" 2>&1 &
pids+=($!)
worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" \
  --capacity "$ctx" --script "$tmp/script.yaml" >"$tmp/worker.log" 2>&1 &
pids+=($!)
ready() { for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && return 0; sleep 0.1; done; return 1; }
ready && ok ready || { bad ready "$(tail -5 "$tmp/router.log" "$tmp/worker.log")"; finish; }
qwen_key=gantry-test-qwen-code    # principal qwen-code in tests/clients/policy.yaml
opencode_key=gantry-test-opencode  # principal opencode
base="http://127.0.0.1:$http/v1"

# The ledger's requests since id $1: "finish_reason input_tokens output_tokens seconds" each.
requests_since() {
  psql -tA -F' ' "$ledger_url" -c "
    select coalesce(f.payload_json::json->>'finish_reason', f.payload_json::json->>'error_reason'),
           f.payload_json::json->>'gen_ai.usage.input_tokens',
           f.payload_json::json->>'gen_ai.usage.output_tokens',
           round((f.ts_unix_us - a.ts_unix_us) / 1e6, 1)
    from ledger_events a join ledger_events f on f.stream_id = a.stream_id
    where a.type = 'admission.decided' and f.type in ('request.finished', 'request.failed')
      and a.id > $1 order by a.id"
}
last_id() { psql -tA "$ledger_url" -c "select coalesce(max(id), 0) from ledger_events"; }
# The payloads of events of type $2 since id $1, one JSON object a line.
events_since() {
  psql -tA "$ledger_url" -c "select payload_json from ledger_events where type = '$2' and id > $1 order by id"
}
wait_ledger() {  # SINCE N: the writer batches; wait (at most 10 s) for N outcomes
  for _ in $(seq 1 100); do [ "$(requests_since "$1" | grep -c .)" -ge "$2" ] && return; sleep 0.1; done
}

# The round trip: the client exits 0, prints the answer, and the ledger shows its two
# tool-carrying requests (turn 1 ends in tool_calls, turn 2 with the result ends in stop).
check_round_trip() {  # NAME RC OUT SINCE EXPECTED_REQUESTS
  local name=$1 rc=$2 out=$3 since=$4 expected=$5
  [ "$rc" = 0 ] && ok "$name-exit-0" || bad "$name-exit-0" "rc=$rc $(tail -c 1500 "$out")"
  grep -q "The heading says: Gantry works" "$out" && ok "$name-final-answer" ||
    bad "$name-final-answer" "$(tail -c 1500 "$out")"
  wait_ledger "$since" "$expected"
  local rows; rows=$(requests_since "$since")
  echo "$name requests (finish input_tokens output_tokens seconds):"; sed 's/^/  /' <<<"$rows"
  local turns; turns=$(python3 -c '
import sys
rows = [l.split() for l in sys.argv[2].splitlines() if l.strip()]
tool = [i for i, r in enumerate(rows) if r[0] == "tool_calls"]
# Turn 2 = turn 1 + the assistant call + the tool result: a later request, more tokens.
good = (len(rows) == int(sys.argv[1]) and len(tool) == 1 and
        all(r[0] in ("tool_calls", "stop") for r in rows) and
        any(int(r[1]) > int(rows[tool[0]][1]) for r in rows[tool[0] + 1:]))
print("ok" if good else "bad")' "$expected" "$rows")
  [ "$turns" = ok ] && ok "$name-two-turns-reached-worker" || bad "$name-two-turns-reached-worker" "$rows"
  check_tools_granted "$name" "$since"
}

# Every tool the client offered was granted: no admission event of the run lists
# stripped tools (the x-gantry-tools-stripped header's names) and each request with
# tools lists all of its client's ten as allowed; the round trip's one call was decided
# allow by the grant of the client's read tool.
check_tools_granted() {  # NAME SINCE
  local got
  got=$(python3 -c '
import json, sys
adm = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
calls = [json.loads(l) for l in sys.argv[2].splitlines() if l.strip()]
problems = []
with_tools = [a for a in adm if a.get("offered_tools")]
if not with_tools:
    problems.append("no request offered tools")
for a in adm:
    if a.get("stripped_tools"):
        problems.append("stripped %s" % a["stripped_tools"])
    offered = a.get("offered_tools") or []
    if offered and (len(offered) != 10 or any(t["verdict"] != "allow" for t in offered)):
        problems.append("offered %s" % [(t["name"], t["verdict"]) for t in offered])
if [(c["tool"], c["verdict"]) for c in calls] not in ([("read_file", "allow")], [("read", "allow")]):
    problems.append("calls decided %s" % calls)
print("; ".join(problems) or "ok")' "$(events_since "$2" admission.decided)" "$(events_since "$2" tool_call.decided)")
  [ "$got" = ok ] && ok "$1-no-tool-stripped" || bad "$1-no-tool-stripped" "$got"
}

# The model calls the client's read tool on $secret, outside the workspace: the router
# denies the call (tool_arguments_not_allowed, by the grant's path constraint) and ends
# the request with tool_call_denied. The client shows TEXT (a fixed string it prints),
# exits with 1 in bounded time, never reads the file nor sends a result back, and
# makes exactly EXPECTED_REQUESTS requests (what it does on the denial, measured: no
# retry).
check_denied() {  # NAME RC SECONDS OUT SINCE EXPECTED_REQUESTS TOOL RULE TEXT
  local name=$1 rc=$2 secs=$3 out=$4 since=$5 expected=$6 tool=$7 rule=$8 text=$9
  [ "$rc" = 1 ] && ok "$name-exits-1" || bad "$name-exits-1" "rc=$rc after $secs s $(tail -c 1500 "$out")"
  python3 -c 'import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]))' "$secs" "$denied_bound" &&
    ok "$name-exits-in-bounded-time" || bad "$name-exits-in-bounded-time" "$secs s (bound $denied_bound s)"
  grep -qF -- "$text" "$out" && ok "$name-shows-denial" || bad "$name-shows-denial" "wanted: $text; got: $(tail -c 1500 "$out")"
  ! grep -qE "SECRET-MARKER|LEAKED|secret\.txt" "$out" && ok "$name-call-never-reached-client" ||
    bad "$name-call-never-reached-client" "$(tail -c 1500 "$out")"
  wait_ledger "$since" "$expected"
  local rows; rows=$(requests_since "$since")
  echo "$name requests (finish input_tokens output_tokens seconds):"; sed 's/^/  /' <<<"$rows"
  local got
  got=$(python3 -c '
import json, sys
expected, tool, rule = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rows = [l.split() for l in sys.argv[4].splitlines() if l.strip()]
adm = [json.loads(l) for l in sys.argv[5].splitlines() if l.strip()]
calls = [json.loads(l) for l in sys.argv[6].splitlines() if l.strip()]
evidence = [json.loads(l) for l in sys.argv[7].splitlines() if l.strip()]
problems = []
# Every request the router saw, refused ones included, and each one ended.
if len(adm) != expected or len(rows) != expected:
    problems.append("%d requests seen, %d ended, expected %d" % (len(adm), len(rows), expected))
if [r[0] for r in rows].count("tool_call_denied") != 1 or any(r[0] not in ("stop", "tool_call_denied") for r in rows):
    problems.append("outcomes %s" % [r[0] for r in rows])
if [(c["tool"], c["verdict"], c["rule_id"], c.get("reason")) for c in calls] != [
        (tool, "deny", rule, "tool_arguments_not_allowed")]:
    problems.append("calls decided %s" % calls)
if any(e.get("tool_results") for e in evidence):
    problems.append("a request carried tool results")
if any(a.get("stripped_tools") for a in adm):
    problems.append("tools stripped")
print("; ".join(problems) or "ok")' "$expected" "$tool" "$rule" "$rows" "$(events_since "$since" admission.decided)" \
    "$(events_since "$since" tool_call.decided)" "$(events_since "$since" request.evidence)")
  [ "$got" = ok ] && ok "$name-denied-once-no-result-sent" || bad "$name-denied-once-no-result-sent" "$got"
}

# Per run: the evidence file, assembled from the router's request.evidence ledger events
# (client, bundle, per-request prompt token count and token-id hash, advertised tools,
# output cap, calls issued and answered, the second turn's rendered prompt, timings).
evidence_dir=${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}/evidence
mkdir -p "$evidence_dir"
check_evidence() {  # NAME MODE RC SINCE
  local name=$1 mode=$2 rc=$3 since=$4 file="$evidence_dir/$1.json" out
  out=$(python3 tests/clients/evidence.py --db "$ledger_url" --since "$since" --mode "$mode" \
          --exit-code "$rc" --out "$file" 2>&1)
  local status=$?
  echo "$name evidence ($file): $out"
  [ $status = 0 ] && ok "$name-evidence" || bad "$name-evidence" "$out"
}
# Whether turn 2's rendered prompt holds turn 1's reasoning in the template's <think>
# block (yes: the client sent it back; no: it did not).
check_reasoning_replay() {  # NAME THINKING yes|no
  local got
  got=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1])).get("second_turn_rendered_prompt") or ""
print("yes" if "<think>\n" + sys.argv[2] + "\n</think>" in p else "no")' "$evidence_dir/$1.json" "$2")
  [ "$got" = "$3" ] && ok "$1-reasoning-replayed-$3" || bad "$1-reasoning-replayed-$3" "got $got"
}

# Qwen Code: settings in $HOME/.qwen (auth type openai = chat completions,
# openai-responses = the Responses API), the endpoint in its OpenAI environment variables.
# Sets since, rc and elapsed; the output is in $tmp/NAME.out.
qwen_client() {  # NAME AUTH_TYPE PROMPT TIMEOUT
  local home="$tmp/home-$1" t0
  mkdir -p "$home/.qwen"
  sed -e 's/capture-model/gantry-demo/' -e "s/\"selectedType\": \"openai\"/\"selectedType\": \"$2\"/" \
    tests/clients/config/qwen-settings.json >"$home/.qwen/settings.json"
  since=$(last_id); t0=$(now)
  (cd "$ws_qwen" && HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" \
    OPENAI_BASE_URL="$base" OPENAI_API_KEY="$qwen_key" OPENAI_MODEL=gantry-demo \
    timeout "$4" "$clients/node_modules/.bin/qwen" "$3" </dev/null) >"$tmp/$1.out" 2>&1
  rc=$?; elapsed=$(secs "$t0" "$(now)")
  echo "$1: exit $rc after $elapsed s"; tail -c 600 "$tmp/$1.out"; echo
}
run_qwen() {  # AUTH_TYPE MODE
  local name="qwen-code-$2"
  qwen_client "$name" "$1" "$qwen_prompt" "$client_timeout"
  check_round_trip "$name" "$rc" "$tmp/$name.out" "$since" 2
  check_evidence "$name" "$2" "$rc" "$since"
  check_reasoning_replay "$name" "I will read it." yes
}
run_qwen openai chat.completions
# Responses: Qwen Code replays reasoning only with an encrypted_content, which Gantry's
# reasoning items carry (docs/router.md, "Responses API").
run_qwen openai-responses responses

# OpenCode: opencode.json in the workspace (the provider's baseURL on our port). Its
# provider package picks the API: @ai-sdk/openai-compatible speaks chat completions,
# @ai-sdk/openai the Responses API. Sets since, rc and elapsed; output in $tmp/NAME.out.
opencode_client() {  # NAME NPM_PACKAGE PROMPT TIMEOUT
  local home="$tmp/home-$1" t0
  mkdir -p "$home"
  sed -e "s/__PORT__/$http/" -e 's/capture-model/gantry-demo/g' -e "s/sk-capture-dummy/$opencode_key/" \
    -e "s|\"npm\": \"@ai-sdk/openai-compatible\"|\"npm\": \"$2\"|" \
    tests/clients/config/opencode.json.template >"$ws_opencode/opencode.json"
  since=$(last_id); t0=$(now)
  (cd "$ws_opencode" && HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" \
    XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state" \
    OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 \
    OPENCODE_DISABLE_LSP_DOWNLOAD=1 npm_config_offline=true \
    timeout "$4" "$clients/node_modules/.bin/opencode" run "$3" </dev/null) >"$tmp/$1.out" 2>&1
  rc=$?; elapsed=$(secs "$t0" "$(now)")
  echo "$1: exit $rc after $elapsed s"; tail -c 600 "$tmp/$1.out"; echo
}
run_opencode() {  # NPM_PACKAGE MODE REASONING_REPLAYED
  local name="opencode-$2"
  opencode_client "$name" "$1" "$opencode_prompt" "$client_timeout"
  # Three requests: the title request (no tools) and the two turns.
  check_round_trip "$name" "$rc" "$tmp/$name.out" "$since" 3
  check_evidence "$name" "$2" "$rc" "$since"
  check_reasoning_replay "$name" "The user wants the heading." "$3"
}
run_opencode @ai-sdk/openai-compatible chat.completions yes
# Responses: OpenCode sends reasoning back only as an item with encrypted_content (with
# an empty summary), which Gantry's reasoning items carry.
run_opencode @ai-sdk/openai responses yes

# The denied calls. Measured (both clients exited 1 after 7-14 s, one attempt, no retry):
#   Qwen Code, chat completions (the stream's error event), prints
#     [API Error: the model called tool 'read_file', which the policy denies to 'qwen-code': rule grants[0].tools.read_file.args.file_path (tool_arguments_not_allowed)]
#   Qwen Code, Responses API (response.failed), prints
#     [API Error: Responses API failed: tool_call_denied: the model called tool 'read_file', which the policy denies to 'qwen-code': rule grants[0].tools.read_file.args.file_path (tool_arguments_not_allowed)]
#   OpenCode, chat completions, prints the error object:
#     Error: {"message":"the model called tool 'read', which the policy denies to 'opencode': rule grants[1].tools.read.args.filePath (tool_arguments_not_allowed)","type":"permission_error","param":null,"code":"tool_call_denied"}
#   OpenCode, Responses API, prints the failed event:
#     Error: {"type":"response.failed","sequence_number":18,"response":{"error":{"code":"tool_call_denied","message":"the model called tool 'read', which the policy denies to 'opencode': rule grants[1].tools.read.args.filePath (tool_arguments_not_allowed)"},"incomplete_details":null}}
# Requests the router saw: Qwen Code 1 (the denied turn); OpenCode 2 (its title request,
# no tools, which gets the scripted text back plain, and the denied turn).
denied_bound=90   # seconds; a client that retried a 5xx would take 100 s or more
qwen_denial="the model called tool 'read_file', which the policy denies to 'qwen-code': rule grants[0].tools.read_file.args.file_path (tool_arguments_not_allowed)"
qwen_client qwen-code-denied-chat.completions openai "$qwen_denied_prompt" "$denied_bound"
check_denied qwen-code-denied-chat.completions "$rc" "$elapsed" "$tmp/qwen-code-denied-chat.completions.out" "$since" 1 \
  read_file grants[0].tools.read_file.args.file_path "[API Error: $qwen_denial]"
qwen_client qwen-code-denied-responses openai-responses "$qwen_denied_prompt" "$denied_bound"
check_denied qwen-code-denied-responses "$rc" "$elapsed" "$tmp/qwen-code-denied-responses.out" "$since" 1 \
  read_file grants[0].tools.read_file.args.file_path "[API Error: Responses API failed: tool_call_denied: $qwen_denial]"
opencode_denial="the model called tool 'read', which the policy denies to 'opencode': rule grants[1].tools.read.args.filePath (tool_arguments_not_allowed)"
opencode_client opencode-denied-chat.completions @ai-sdk/openai-compatible "$opencode_denied_prompt" "$denied_bound"
check_denied opencode-denied-chat.completions "$rc" "$elapsed" "$tmp/opencode-denied-chat.completions.out" "$since" 2 \
  read grants[1].tools.read.args.filePath "{\"message\":\"$opencode_denial\",\"type\":\"permission_error\",\"param\":null,\"code\":\"tool_call_denied\"}"
opencode_client opencode-denied-responses @ai-sdk/openai "$opencode_denied_prompt" "$denied_bound"
check_denied opencode-denied-responses "$rc" "$elapsed" "$tmp/opencode-denied-responses.out" "$since" 2 \
  read grants[1].tools.read.args.filePath "\"error\":{\"code\":\"tool_call_denied\",\"message\":\"$opencode_denial\"}"

out=$("$g" ledger verify --db "$ledger_url" --checkpoints "$tmp/spool" 2>&1)
[ $? = 0 ] && ok ledger-chains-verify || bad ledger-chains-verify "$out"
# The evidence files hold what the checks needed; the run's database goes.
{ cleanup; wait; } 2>/dev/null
psql -q "$GANTRY_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || echo "could not drop $db"
finish
