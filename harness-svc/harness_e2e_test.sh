#!/usr/bin/env bash
# Agent tasks end to end with real processes over real sockets: gantry-router (HTTP, the
# demo policy, the ledger), gantry-worker serving a packed make-test-model bundle with
# the scripted sampler (a test double that forces exact text, hermes_json tool calls
# included, chosen by a substring of the conversation's last message), gantry-sandbox
# (ZeroMQ on its Unix socket, admitting this test's uid as the principal harness;
# bubblewrap; needs root), Postgres (GANTRY_TEST_PG_URL, set by tests/run), and
# `gantry task run` as the harness, with the harness's own service-account key.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

# Manifest validation needs no services: precise errors, never a crash.
mkdir -p "$tmp/bad"
cat >"$tmp/bad/task.yaml" <<'YAML'
version: 1
goal: x
workspace: .
model: {name: gantry-demo}
tools: [read_file]
permissions: {fs: {read: ["**"]}}
budget: {max_model_tokens: 10, max_tool_calls: 1, max_turns: 1, max_wall_seconds: ten}
YAML
out=$("$g" task run "$tmp/bad/task.yaml" --key k 2>&1); rc=$?
[ $rc = 1 ] && grep -qE "task.yaml:7:[0-9]+: budget.max_wall_seconds: expected an integer" <<<"$out" &&
  ok manifest-error-has-position || bad manifest-error-has-position "rc=$rc $out"
# A manifest cannot choose whose command grants the sandbox applies.
cat >"$tmp/bad/rules.yaml" <<'YAML'
version: 1
goal: x
workspace: .
model: {name: gantry-demo}
tools: [exec]
permissions: {process: {exec: {rule_set: admin, executables: [{executable: /usr/bin/cat}]}}}
budget: {max_model_tokens: 10, max_tool_calls: 1, max_turns: 1, max_wall_seconds: 10}
YAML
out=$("$g" task run "$tmp/bad/rules.yaml" --key k 2>&1); rc=$?
[ $rc = 1 ] && grep -qE "rules.yaml:6:[0-9]+: permissions.process.exec.rule_set: no longer accepted" <<<"$out" &&
  ok manifest-rule-set-refused || bad manifest-rule-set-refused "rc=$rc $out"

# gantry-sandbox does not start without what makes it safe: workspace roots, admitted
# callers, never root's ids, a Unix socket (tcp only with CURVE).
sb=sandbox-svc/gantry-sandbox
"$sb" --peer-uid 0=harness >"$tmp/sb.err" 2>&1; a=$?
"$sb" --workspace-root "$tmp" >>"$tmp/sb.err" 2>&1; b=$?
"$sb" --workspace-root "$tmp" --peer-uid 0=harness --fallback-uid 0 >>"$tmp/sb.err" 2>&1; c=$?
"$sb" --workspace-root / --peer-uid 0=harness >>"$tmp/sb.err" 2>&1; d=$?
"$sb" --workspace-root "$tmp" --peer-uid 0=harness --endpoint tcp://127.0.0.1:1 >>"$tmp/sb.err" 2>&1; e=$?
[ "$a$b$c$d$e" = 22221 ] && grep -q "the endpoint must be ipc://" "$tmp/sb.err" &&
  ok sandbox-refuses-unsafe-flags || bad sandbox-refuses-unsafe-flags "$a$b$c$d$e $(cat "$tmp/sb.err")"

[ "$(id -u)" = 0 ] || { bad root "the sandbox needs root: run as root (tests/run does)"; finish; }
[ -n "${GANTRY_TEST_PG_URL:-}" ] || { bad ledger "GANTRY_TEST_PG_URL unset: run through tests/run"; finish; }

# A bundle.
make_test_bundle "$tmp/bundle" 4096 256 || { bad setup "make-test-model / bundle pack"; finish; }

# The workspace the tasks work in (root owns it: the sandbox runs calls as 65534).
ws="$tmp/ws"; mkdir -p "$ws/src" "$ws/docs" "$ws/secret"
printf '# Demo project\nREADME-MARKER: a tiny demo for the harness.\n' >"$ws/README.md"
printf 'int main(void) { return 0; }  /* MAIN-MARKER */\n' >"$ws/src/main.c"
printf 'int add(int a, int b) { return a + b; }  /* UTIL-MARKER */\n' >"$ws/src/util.c"
printf 'LONG-MARKER\n' >"$ws/docs/long.txt"
printf 'do not read\n' >"$ws/secret/key.txt"
chmod -R a+rX "$ws"

call() { printf '<tool_call>\\n{\\"name\\": \\"%s\\", \\"arguments\\": %s}\\n</tool_call>' "$1" "$2"; }
words=$(printf ' word%.0s' $(seq 1 200))
cat >"$tmp/script.yaml" <<YAML
- match: "CHILD REPORT"
  emit: "The child task reported: one helper file."
- match: "(task four)"
  emit: "$(call delegate_task '{\"goal\": \"Describe util (subtask four)\", \"tools\": [\"read_file\"], \"fs_read\": [\"src/**\"], \"max_model_tokens\": 100, \"max_tool_calls\": 2, \"max_turns\": 3}')"
- match: "(subtask four)"
  emit: "$(call read_file '{\"path\": \"src/util.c\"}')"
- match: "(task one)"
  emit: "$(call read_file '{\"path\": \"README.md\"}')"
- match: "README-MARKER"
  emit: "$(call read_file '{\"path\": \"src/main.c\"}')"
- match: "MAIN-MARKER"
  emit: "Summary:\\n- README.md introduces a tiny demo\\n- src/main.c holds the entry point\\n- two source files in all"
- match: "(task two)"
  emit: "$(call exec '{\"argv\": [\"sh\", \"-c\", \"cat src/*.c | wc -l\"]}')"
- match: "DENIED by the harness"
  emit: "$(call read_file '{\"path\": \"src/util.c\"}')"
- match: "UTIL-MARKER"
  emit: "- src/util.c defines add()"
- match: "(task three)"
  emit: "$(call read_file '{\"path\": \"docs/long.txt\"}')"
- match: "LONG-MARKER"
  emit: "$words"
- match: ""
  emit: "Unscripted."
YAML
cat >"$tmp/models.json" <<JSON
{"models": [{"name": "gantry-demo", "tokenizer_dir": "$tmp/bundle", "context_length": 4096,
             "tool_protocol": "hermes_json", "default_max_tokens": 256}]}
JSON
db="t_harness_$$_$RANDOM"
psql -q "$GANTRY_TEST_PG_URL" -c "CREATE DATABASE $db" || { bad setup "create database"; finish; }
ledger_url="${GANTRY_TEST_PG_URL%/*}/$db"
export GANTRY_LEDGER_KEY="$tmp/ledger.key"  # the owner sets up; router and harness write as the writer role
writer_url=$("$g" ledger setup --db "$ledger_url") || { bad setup "ledger setup: $writer_url"; finish; }

http=$(free_port)
# The sandbox's Unix socket lives in a short private path (an AF_UNIX path holds 107 bytes).
sdir=$(mktemp -d /tmp/gantry-e2e-XXXXXX)
trap 'cleanup; rm -rf "$sdir"' EXIT
sandbox="ipc://$sdir/sandbox.sock"
# Plain workers (no CURVE): on ipc in a directory only this user can open.
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }
router/gantry-router --listen "127.0.0.1:$http" --workers "$workers" \
  --policy deploy/demo/policy.yaml --models "$tmp/models.json" --ledger "$writer_url" \
  --ledger-spool "$tmp/router-spool" >"$tmp/router.log" 2>&1 &
pids+=($!)
worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" \
  --script "$tmp/script.yaml" >"$tmp/worker.log" 2>&1 &
pids+=($!)
sandbox-svc/gantry-sandbox --endpoint "$sandbox" --peer-uid "$(id -u)=harness" --workspace-root "$tmp" \
  --workers 2 --policy deploy/demo/policy.yaml >"$tmp/sandbox.log" 2>&1 &
pids+=($!)
ready() { for _ in $(seq 1 150); do curl -fs "http://127.0.0.1:$http/readyz" >/dev/null && return 0; sleep 0.1; done; return 1; }
ready && ok ready || { bad ready "$(tail -5 "$tmp/router.log" "$tmp/worker.log" "$tmp/sandbox.log")"; finish; }

# manifest NAME GOAL TOOLS BUDGET ACCEPTANCE [EXTRA PERMISSIONS]
manifest() {
  cat >"$tmp/$1.yaml" <<YAML
version: 1
name: $1
goal: "$2"
workspace: ws
client_profile: harness-e2e
model: {name: gantry-demo, max_tokens_per_turn: ${per_turn:-64}}
tools: $3
permissions:
  fs:
    read: ["README.md", "src/**", "docs/**"]
  process:
    exec:
      executables:
        - {executable: /usr/bin/cat, operands: {globs: ["/workspace/src/**"]}}
  network: deny
budget: $4
acceptance: $5
YAML
}
run_task() {  # run_task NAME -> $task (id), $rc, output in $tmp/NAME.out
  "$g" task run "$tmp/$1.yaml" --router "http://127.0.0.1:$http" --sandbox "${task_sandbox:-$sandbox}" \
    --ledger "$writer_url" --spool-dir "$tmp/harness-spool" --key gantry-demo-harness >"$tmp/$1.out" 2>&1
  rc=$?
  task=$(sed -n 's/^task \(task_[0-9a-f]*\): .*/\1/p' "$tmp/$1.out" | head -1)
}
export_verifies() {  # export_verifies NAME ID -> the evidence file $tmp/NAME.json
  "$g" ledger export --task "$2" --db "$ledger_url" -o "$tmp/$1.json" 2>"$tmp/$1.export.err" &&
    python3 - "$tmp/$1.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "gantry.evidence.v1" and d["stream_id"] == sys.argv[2], d.get("stream_id")
assert d["chain"]["verified"] is True, d["chain"]
types = [e["type"] for e in d["events"]]
assert types[0] == "task.started" and types[-1] == "task.finished", types
assert len(types) == d["chain"]["events"]
PY
}
types_of() { python3 -c 'import json,sys; print(" ".join(e["type"] for e in json.load(open(sys.argv[1]))["events"]))' "$1"; }

# 1. A read-only repository summary: two reads, then a final answer that holds.
manifest summary "Summarise the repository in three bullets (task one)." "[read_file, list_dir]" \
  "{max_model_tokens: 400, max_tool_calls: 4, max_turns: 5, max_wall_seconds: 120}" \
  "[{answer_contains: 'Summary:'}, {exactly_n_bullets: 3}, {cited_files_were_read: true}]"
run_task summary
[ $rc = 0 ] && [ -n "$task" ] && grep -q "^task $task: completed" "$tmp/summary.out" &&
  grep -q "acceptance PASS cited_files_were_read: cited and read: README.md, src/main.c" "$tmp/summary.out" &&
  ok summary-completes || bad summary-completes "rc=$rc $(cat "$tmp/summary.out") $(tail -5 "$tmp/worker.log")"
grep -qE ' tool\.proposed +read_file \{"path":"README.md"\}' "$tmp/summary.out" &&
  grep -qE ' tool\.executed +read_file ran exit=0' "$tmp/summary.out" &&
  grep -qE ' turn\.completed +turn 1 .* ttft=[0-9]+\.[0-9]ms req_' "$tmp/summary.out" && ok summary-live-progress ||
  bad summary-live-progress "$(cat "$tmp/summary.out")"
if export_verifies summary "$task"; then ok summary-export-verifies; else bad summary-export-verifies "$(cat "$tmp/summary.export.err")"; fi
want="task.started turn.requested turn.completed tool.proposed tool.executed turn.requested turn.completed tool.proposed budget.warning tool.executed turn.requested turn.completed task.finished"
got=$(types_of "$tmp/summary.json" 2>&1)
[ "$got" = "$want" ] && ok summary-event-order || bad summary-event-order "$got"
show=$("$g" task show "$task" --ledger "$ledger_url" 2>&1)
[ $? = 0 ] && grep -q "chain: verified, 13 events" <<<"$show" && grep -q "task.finished .*completed" <<<"$show" &&
  ok task-show || bad task-show "$show"
python3 - "$tmp/summary.json" <<'PY' && ok summary-call-ids-match || bad summary-call-ids-match "$(cat "$tmp/summary.json" | head -c 3000)"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
proposed = [e["payload"]["gen_ai.tool.call.id"] for e in ev if e["type"] == "tool.proposed"]
executed = [e["payload"]["gen_ai.tool.call.id"] for e in ev if e["type"] == "tool.executed"]
assert proposed == executed and len(proposed) == 2 and all(p.startswith("call_") for p in proposed)
fin = ev[-1]["payload"]
assert fin["status"] == "completed" and fin["files_read"] == ["README.md", "src/main.c"], fin
assert all(c["passed"] for c in fin["acceptance"]) and len(fin["acceptance"]) == 3
started = ev[0]["payload"]
assert started["client_profile"] == "harness-e2e" and started["permissions"]["network"] == "deny"
PY
python3 - "$tmp/summary.json" "$ledger_url" <<'PY' && ok summary-turn-evidence || bad summary-turn-evidence "$(grep -oE '"gantry.(timings|prompt)[^,]*' "$tmp/summary.json" | head)"
import json, subprocess, sys
ev = json.load(open(sys.argv[1]))["events"]
turns = [e["payload"] for e in ev if e["type"] == "turn.completed"]
assert len(turns) == 3, len(turns)
for t in turns:  # every turn streamed a first token, before the whole response ended
    assert 0 < t["gantry.timings.first_token_us"] <= t["gantry.timings.response_us"], t
    assert len(t["gantry.bundle.identity_sha256"]) == 64 and t["gen_ai.usage.input_tokens"] > 0, t
# Each turn's prompt is identified by its token ids; each next turn's prompt differs
# (it carries the tool results), and the router's own ledger names the same ids.
hashes = [t["gantry.prompt.ids_sha256"] for t in turns]
assert len(set(hashes)) == 3 and all(len(h) == 64 for h in hashes), hashes
for t in turns:
    out = subprocess.run(["psql", "-tA", sys.argv[2], "-c",
        "select payload_json::json->>'gantry.prompt.ids_sha256' from ledger_events "
        "where type = 'request.finished' and stream_id = '%s'" % t["gantry.request_id"]],
        capture_output=True, text=True).stdout.strip()
    assert out == t["gantry.prompt.ids_sha256"], (out, t)
PY

# 2. A denied shell form (a pipeline through sh -c) the model recovers from.
manifest recover "Inspect the sources (task two)." "[read_file, exec]" \
  "{max_model_tokens: 400, max_tool_calls: 4, max_turns: 5, max_wall_seconds: 120}" \
  "[{exactly_n_bullets: 1}, {cited_files_were_read: true}]"
run_task recover
[ $rc = 0 ] && grep -q "^task $task: completed" "$tmp/recover.out" && ok denied-then-recovered ||
  bad denied-then-recovered "rc=$rc $(cat "$tmp/recover.out")"
grep -qE ' tool\.denied +exec by harness: permission:exec: rule:' "$tmp/recover.out" && ok denial-shown ||
  bad denial-shown "$(cat "$tmp/recover.out")"
if export_verifies recover "$task"; then ok recover-export-verifies; else bad recover-export-verifies "$(cat "$tmp/recover.export.err")"; fi
python3 - "$tmp/recover.json" <<'PY' && ok denial-recorded-before-next-turn || bad denial-recorded-before-next-turn "$(types_of "$tmp/recover.json")"
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
types = [e["type"] for e in ev]
i = types.index("tool.denied")
assert types[i - 1] == "tool.proposed" and types[i + 1] == "turn.requested", types
assert "tool.executed" not in types[:i], types   # the denied call never ran
d = ev[i]["payload"]
assert d["gen_ai.tool.name"] == "exec" and d["reason"].startswith("permission:exec: rule:"), d
fin = ev[-1]["payload"]
assert fin["denials"] == 1 and fin["tool_calls"] == 2 and fin["files_read"] == ["src/util.c"], fin
PY

# 3. A token budget reached exactly at its limit, never past it: the second turn is
# reserved what is left, and the scripted 200 words are cut there.
manifest budget "Read the long document (task three)." "[read_file]" \
  "{max_model_tokens: 60, max_tool_calls: 4, max_turns: 5, max_wall_seconds: 120}" "[]"
run_task budget
[ $rc = 1 ] && grep -q "^task $task: budget_exhausted (max_model_tokens: 60 of 60 used" "$tmp/budget.out" &&
  ok budget-exhausted-exactly || bad budget-exhausted-exactly "rc=$rc $(cat "$tmp/budget.out")"
if export_verifies budget "$task"; then ok budget-export-verifies; else bad budget-export-verifies "$(cat "$tmp/budget.export.err")"; fi
python3 - "$tmp/budget.json" "$ledger_url" <<'PY' && ok budget-ledger-totals || bad budget-ledger-totals "$(head -c 4000 "$tmp/budget.json")"
import json, subprocess, sys
ev = json.load(open(sys.argv[1]))["events"]
req = [e["payload"] for e in ev if e["type"] == "turn.requested"]
done = [e["payload"] for e in ev if e["type"] == "turn.completed"]
assert len(req) == 2 and len(done) == 2, (req, done)
first = done[0]["gen_ai.usage.output_tokens"]
assert req[0]["max_tokens"] == 60 and req[1]["max_tokens"] == 60 - first, req
assert sum(d["gen_ai.usage.output_tokens"] for d in done) == 60
assert done[1]["gen_ai.response.finish_reasons"] == ["length"]
fin = ev[-1]["payload"]
assert fin["status"] == "budget_exhausted" and fin["model_tokens_used"] == 60 == fin["max_model_tokens"], fin
warn = [e["payload"]["threshold_percent"] for e in ev if e["type"] == "budget.warning" and e["payload"]["budget"] == "max_model_tokens"]
assert warn == [50, 80], warn
# The router's own evidence of the same requests agrees.
ids = ",".join("'%s'" % d["gantry.request_id"] for d in done)
out = subprocess.run(["psql", "-tA", sys.argv[2], "-c",
    "select sum((payload_json::json->>'gen_ai.usage.output_tokens')::int) from ledger_events "
    "where type = 'request.finished' and stream_id in (%s)" % ids], capture_output=True, text=True).stdout.strip()
assert out == "60", out
PY

# 4. A child task: narrower tools, paths and budget; its tokens and calls are the
# parent's; the parent link is recorded; its report returns as an observation.
per_turn=160 manifest parent "Delegate the reading (task four)." "[read_file, list_dir, delegate_task]" \
  "{max_model_tokens: 400, max_tool_calls: 4, max_turns: 5, max_wall_seconds: 120, max_children: 1}" \
  "[{answer_contains: 'child task reported'}]"
run_task parent
parent=$task
[ $rc = 0 ] && grep -q "^task $parent: completed" "$tmp/parent.out" && grep -qE ' task\.delegated +task_' "$tmp/parent.out" &&
  ok child-task-completes || bad child-task-completes "rc=$rc $(cat "$tmp/parent.out")"
child=$(sed -n 's/.* task\.delegated *\(task_[0-9a-f]*\) .*/\1/p' "$tmp/parent.out" | head -1)
if export_verifies parent "$parent" && export_verifies child "$child"; then ok parent-and-child-exports-verify; else
  bad parent-and-child-exports-verify "child=$child $(cat "$tmp/parent.export.err" "$tmp/child.export.err" 2>&1)"; fi
python3 - "$tmp/parent.json" "$tmp/child.json" "$parent" <<'PY' && ok child-narrower-and-linked || bad child-narrower-and-linked "$(head -c 3000 "$tmp/child.json")"
import json, sys
pe = json.load(open(sys.argv[1]))["events"]
ce = json.load(open(sys.argv[2]))["events"]
start = ce[0]["payload"]
assert start["gantry.task.parent_id"] == sys.argv[3], start
assert start["tools"] == ["read_file"] and start["permissions"]["fs.read"] == ["src/**"], start
assert start["budget"]["max_model_tokens"] == 100 and start["budget"]["max_tool_calls"] == 2, start
cfin = ce[-1]["payload"]
assert cfin["status"] == "completed" and cfin["files_read"] == ["src/util.c"], cfin
pfin = pe[-1]["payload"]
child_done = [e["payload"] for e in pe if e["type"] == "tool.executed"][0]
assert child_done["outcome"] == "child_completed", child_done
own = sum(e["payload"]["gen_ai.usage.output_tokens"] for e in pe if e["type"] == "turn.completed")
assert pfin["model_tokens_used"] == own + cfin["model_tokens_used"], (pfin, own, cfin)
assert pfin["tool_calls"] == 1 + cfin["tool_calls"], pfin
PY
link=$(psql -tA "$ledger_url" -c "select parent_task_id from ledger_tasks where task_id = '$child'")
[ "$link" = "$parent" ] && ok child-parent-link-indexed || bad child-parent-link-indexed "link=$link"

out=$("$g" ledger verify --db "$ledger_url" --checkpoints "$tmp/router-spool:$tmp/harness-spool" 2>&1)
[ $? = 0 ] && ok all-chains-verify || bad all-chains-verify "$out"
n=$(psql -tA "$ledger_url" -c "select count(*) from ledger_tasks where principal = 'harness'")
[ "$n" = 5 ] && ok task-index || bad task-index "ledger_tasks rows: $n"

# 5. The sandbox trusts no caller: a harness whose uid the service does not admit, and a
# workspace outside the service's roots, each end the task at its first tool call with
# the service's stable code; nothing runs.
sandbox-svc/gantry-sandbox --endpoint "ipc://$sdir/strict.sock" --peer-uid 4250=harness --workspace-root "$tmp" \
  --policy deploy/demo/policy.yaml >"$tmp/strict.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do [ -S "$sdir/strict.sock" ] && break; sleep 0.1; done
manifest stranger "Summarise the repository in three bullets (task one)." "[read_file, list_dir]" \
  "{max_model_tokens: 400, max_tool_calls: 4, max_turns: 5, max_wall_seconds: 120}" "[]"
task_sandbox="ipc://$sdir/strict.sock" run_task stranger
[ $rc = 1 ] && grep -q "^task $task: error (the sandbox refused the task: sandbox_peer_unknown: .*admits no principal for uid $(id -u) " "$tmp/stranger.out" &&
  grep -q '"event":"sandbox.peer_refused".*"reason":"sandbox_peer_unknown"' "$tmp/strict.log" &&
  ! grep -q '"event":"sandbox.call_done"' "$tmp/strict.log" &&
  ok unknown-peer-refused || bad unknown-peer-refused "rc=$rc $(cat "$tmp/stranger.out") $(tail -3 "$tmp/strict.log")"
outside=$(mktemp -d /tmp/gantry-e2e-outside-XXXXXX)
printf 'outside\n' >"$outside/README.md"
manifest outside "Summarise the repository in three bullets (task one)." "[read_file, list_dir]" \
  "{max_model_tokens: 400, max_tool_calls: 4, max_turns: 5, max_wall_seconds: 120}" "[]"
sed -i "s|^workspace: ws$|workspace: $outside|" "$tmp/outside.yaml"
run_task outside
rm -rf "$outside"
[ $rc = 1 ] && grep -q "^task $task: error (the sandbox refused the task: sandbox_workspace_outside_roots: .*not beneath a workspace root" "$tmp/outside.out" &&
  ok workspace-outside-roots-refused || bad workspace-outside-roots-refused "rc=$rc $(cat "$tmp/outside.out")"
finish
