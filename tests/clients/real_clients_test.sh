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
# Rules match a substring of the last message: the tool result (turn 2) holds the
# heading; the prompt (turn 1) names the client. Turn 1 thinks first (the worker splits
# <think> into reasoning), so the evidence shows whether the client sent the reasoning
# back for the template to render in turn 2. OpenCode's title request (no tools) ends
# with the same user message as its turn 1, so no rule can tell them apart: it gets the
# same text back, plain (no tools advertised: nothing is parsed), and a line of text
# before the call makes that a harmless title ("Reading index.html.").
cat >"$tmp/script.yaml" <<YAML
- match: "Gantry works"
  emit: "The heading says: Gantry works"
- match: "$qwen_prompt"
  emit: "<think>\\nI will read it.\\n</think>\\n\\n<tool_call>\\n{\\"name\\": \\"read_file\\", \\"arguments\\": {\\"file_path\\": \\"$ws_qwen/index.html\\"}}\\n</tool_call>"
- match: "$opencode_prompt"
  emit: "<think>\\nThe user wants the heading.\\n</think>\\n\\nReading index.html.\\n<tool_call>\\n{\\"name\\": \\"read\\", \\"arguments\\": {\\"filePath\\": \\"$ws_opencode/index.html\\"}}\\n</tool_call>"
- match: ""
  emit: "Reading a page heading"
YAML
cat >"$tmp/models.json" <<JSON
{"models": [{"name": "gantry-demo", "tokenizer_dir": "$tmp/bundle", "context_length": $ctx,
             "tool_protocol": "hermes_json", "default_max_tokens": 4096}]}
JSON
db="t_clients_$$_$RANDOM"
psql -q "$GANTRY_TEST_PG_URL" -c "CREATE DATABASE $db" || { bad setup "create database"; finish; }
ledger_url="${GANTRY_TEST_PG_URL%/*}/$db"
http=$(free_port); zport=$(free_port)
router/gantry-router --listen "127.0.0.1:$http" --workers "tcp://127.0.0.1:$zport" \
  --policy deploy/demo/policy.yaml --models "$tmp/models.json" \
  --ledger "$ledger_url" --ledger-spool "$tmp/spool" >"$tmp/router.log" 2>&1 &
pids+=($!)
worker/server/gantry-worker --bundle "$tmp/bundle" --router "tcp://127.0.0.1:$zport" \
  --capacity "$ctx" --script "$tmp/script.yaml" >"$tmp/worker.log" 2>&1 &
pids+=($!)
ready() { for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && return 0; sleep 0.1; done; return 1; }
ready && ok ready || { bad ready "$(tail -5 "$tmp/router.log" "$tmp/worker.log")"; finish; }
key=gantry-demo-dev   # dana (developers) in the demo policy
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
run_qwen() {  # AUTH_TYPE MODE
  local name="qwen-code-$2" home="$tmp/home-qwen-$2" since t0 rc
  mkdir -p "$home/.qwen"
  sed -e 's/capture-model/gantry-demo/' -e "s/\"selectedType\": \"openai\"/\"selectedType\": \"$1\"/" \
    tests/clients/config/qwen-settings.json >"$home/.qwen/settings.json"
  since=$(last_id); t0=$(now)
  (cd "$ws_qwen" && HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" \
    OPENAI_BASE_URL="$base" OPENAI_API_KEY="$key" OPENAI_MODEL=gantry-demo \
    timeout "$client_timeout" "$clients/node_modules/.bin/qwen" "$qwen_prompt" </dev/null) >"$tmp/$name.out" 2>&1
  rc=$?
  echo "$name: exit $rc after $(secs "$t0" "$(now)") s"; tail -c 600 "$tmp/$name.out"; echo
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
# @ai-sdk/openai the Responses API.
run_opencode() {  # NPM_PACKAGE MODE REASONING_REPLAYED
  local name="opencode-$2" home="$tmp/home-opencode-$2" since t0 rc
  mkdir -p "$home"
  sed -e "s/__PORT__/$http/" -e 's/capture-model/gantry-demo/g' -e "s/sk-capture-dummy/$key/" \
    -e "s|\"npm\": \"@ai-sdk/openai-compatible\"|\"npm\": \"$1\"|" \
    tests/clients/config/opencode.json.template >"$ws_opencode/opencode.json"
  since=$(last_id); t0=$(now)
  (cd "$ws_opencode" && HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_CACHE_HOME="$home/.cache" \
    XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state" \
    OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 \
    OPENCODE_DISABLE_LSP_DOWNLOAD=1 npm_config_offline=true \
    timeout "$client_timeout" "$clients/node_modules/.bin/opencode" run "$opencode_prompt" </dev/null) >"$tmp/$name.out" 2>&1
  rc=$?
  echo "$name: exit $rc after $(secs "$t0" "$(now)") s"; tail -c 600 "$tmp/$name.out"; echo
  # Three requests: the title request (no tools) and the two turns.
  check_round_trip "$name" "$rc" "$tmp/$name.out" "$since" 3
  check_evidence "$name" "$2" "$rc" "$since"
  check_reasoning_replay "$name" "The user wants the heading." "$3"
}
run_opencode @ai-sdk/openai-compatible chat.completions yes
# Responses: OpenCode sends reasoning back only as an item with encrypted_content (with
# an empty summary), which Gantry's reasoning items carry.
run_opencode @ai-sdk/openai responses yes

out=$("$g" ledger verify --db "$ledger_url" 2>&1)
[ $? = 0 ] && ok ledger-chains-verify || bad ledger-chains-verify "$out"
# The evidence files hold what the checks needed; the run's database goes.
{ cleanup; wait; } 2>/dev/null
psql -q "$GANTRY_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || echo "could not drop $db"
finish
