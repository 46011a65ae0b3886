#!/usr/bin/env bash
# Issue 26's structured outputs through the whole path: gantry-router and a real
# gantry-worker sampling a random-weight bundle (make-test-model, the Qwen3 vocabulary)
# at temperature 1, so that an unconstrained answer is noise. Checks, over HTTP with
# the request shapes any OpenAI SDK sends: chat completions' response_format
# json_schema answers parse and validate for every seed, streamed equals not streamed
# for one seed, the Responses API's text.format does the same and echoes it, JSON mode
# answers are objects, and a schema the engine cannot enforce is a 400 naming the field
# before any worker is asked.
set -u
source tests/lib/shtest.sh
g=cli/gantry
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/stack.sh

make_test_bundle "$tmp/bundle" 1024 64 32 || { bad setup "make-test-model / bundle pack"; finish; }
write_models "$tmp/models.json" "$tmp/bundle" 1024 64
cat >"$tmp/policy.yaml" <<YAML
version: 1
defaults:
  budgets: {tokens_per_day: 1000000, tokens_per_month: 10000000, requests_per_minute: 1000, concurrent_requests: 8}
models:
  - {name: gantry-demo, bundles: [gantry-demo]}
principals:
  users:
    - {name: dana, key_sha256: $(key_sha256 k-dana), priority: interactive}
grants:
  - user: dana
    models: {gantry-demo: {}}
YAML
http=$(free_port)
new_worker_ipc workers || { bad setup "no private ipc directory"; finish; }
router/gantry-router --listen "127.0.0.1:$http" --workers "$workers" \
  --policy "$tmp/policy.yaml" --models "$tmp/models.json" >"$tmp/router.log" 2>&1 &
pids+=($!)
worker/server/gantry-worker --bundle "$tmp/bundle" --router "$workers" --slots 4 --threads 1 \
  --worker-id host/one >"$tmp/worker.log" 2>&1 &
pids+=($!)
live() { curl -fs "http://127.0.0.1:$http/metrics" | grep -q '^gantry_router_live_workers 1$'; }
for _ in $(seq 1 150); do live && break; sleep 0.1; done
live && ok worker-live || { bad worker-live "$(tail -n 5 "$tmp/router.log" "$tmp/worker.log")"; finish; }

python3 - "$http" >"$tmp/checks.txt" 2>&1 <<'PY'
import json, sys, urllib.error, urllib.request
port = sys.argv[1]
SCHEMA = {"type": "object",
          "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9},
                         "tag": {"enum": ["a", "b"]}},
          "required": ["ok", "n"], "additionalProperties": False}

def post(path, body, stream=False):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Authorization": "Bearer k-dana", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def valid(v):
    return (isinstance(v, dict) and set(v) <= {"ok", "n", "tag"} and isinstance(v.get("ok"), bool)
            and type(v.get("n")) is int and 0 <= v["n"] <= 9 and v.get("tag", "a") in ("a", "b"))

def chat(seed, stream=False, fmt=None):
    body = {"model": "gantry-demo", "messages": [{"role": "user", "content": "Answer as JSON."}],
            "temperature": 1, "seed": seed, "max_tokens": 60, "stream": stream,
            "response_format": fmt or {"type": "json_schema",
                                       "json_schema": {"name": "answer", "strict": True, "schema": SCHEMA}}}
    status, text = post("/v1/chat/completions", body)
    if status != 200:
        return status, text, None
    if not stream:
        doc = json.loads(text)
        return status, doc["choices"][0]["message"]["content"], doc["choices"][0]["finish_reason"]
    content, finish = "", None
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            ev = json.loads(line[6:])
            for c in ev.get("choices", []):
                content += c.get("delta", {}).get("content") or ""
                finish = c.get("finish_reason") or finish
    return status, content, finish

bad = []
for seed in range(1, 31):
    r = chat(seed)
    if not (r[0] == 200 and r[2] == "stop" and valid(json.loads(r[1]))):
        bad.append(f"seed {seed}: {r[0]} {r[2]} {r[1][:200]!r}")
print("schema-answers-validate", "ok" if not bad else "; ".join(bad))
a, b = chat(7), chat(7, stream=True)
print("streamed-equals-whole", "ok" if a[1] == b[1] and a[2] == b[2] == "stop" else f"{a} vs {b}")
status, text = post("/v1/responses", {"model": "gantry-demo", "input": "Answer as JSON.", "temperature": 1,
                                      "seed": 3, "max_output_tokens": 60,
                                      "text": {"format": {"type": "json_schema", "name": "answer", "schema": SCHEMA}}})
doc = json.loads(text) if status == 200 else {}
out = "".join(p.get("text", "") for item in doc.get("output", []) for p in item.get("content", []) or [])
echo = doc.get("text", {}).get("format", {}).get("type")
print("responses-text-format", "ok" if status == 200 and valid(json.loads(out or "null")) and echo == "json_schema"
      else f"{status} {text[:300]}")
status, content, finish = chat(5, fmt={"type": "json_object"})
ok = status == 200 and (finish == "length" or isinstance(json.loads(content), dict)) and content.lstrip().startswith("{")
print("json-mode-object", "ok" if ok else f"{status} {finish} {content[:200]}")
status, text = post("/v1/chat/completions", {"model": "gantry-demo", "messages": [{"role": "user", "content": "x"}],
                    "response_format": {"type": "json_schema", "json_schema": {"name": "a",
                                        "schema": {"type": "string", "pattern": "^a"}}}})
err = json.loads(text).get("error", {}) if status == 400 else {}
print("unenforceable-schema-400", "ok" if err.get("code") == "unsupported_parameter"
      and err.get("param") == "response_format.json_schema.schema" else f"{status} {text[:300]}")
PY
while read -r name verdict; do
  [ "$verdict" = ok ] && ok "$name" || bad "$name" "$verdict"
done <"$tmp/checks.txt"
grep -q . "$tmp/checks.txt" || bad checks-ran "$(cat "$tmp/checks.txt")"
finish
