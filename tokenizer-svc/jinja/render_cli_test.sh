#!/usr/bin/env bash
# `gantry render` as a user runs it: exact output for every reference fixture, template
# errors with the template line and a non-zero status, usage errors.
set -u
g=cli/gantry
d=tests/data/render
source tests/lib/shtest.sh
tmp=${TEST_TMPDIR:-$(mktemp -d)}

# Every template but Llama 3.2, which prints today's date (the conformance test pins the clock).
for tpl in qwen3 llama3 gemma3 deepseek_r1_distill qwen25 llama31 mistral_v03 phi4 smollm2; do
  for conv in "$d"/conversations/*.json; do
    case_name=$(basename "$conv" .json)
    expected="$d/expected-render/$tpl/$case_name"
    "$g" render --tokenizer "$d/templates/$tpl" "$conv" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ -f "$expected.txt" ]; then
      if [ "$status" = 0 ] && cmp -s "$tmp/out" "$expected.txt"; then
        ok "$tpl/$case_name"
      else
        bad "$tpl/$case_name" "status $status, stderr: $(cat "$tmp/err")"
      fi
    else
      message=$(head -c 200 "$expected.error.txt" | head -1)
      if [ "$status" = 1 ] && [ ! -s "$tmp/out" ] && grep -qF -- "$message" "$tmp/err" &&
         grep -qE 'line [0-9]+: ' "$tmp/err"; then
        ok "$tpl/$case_name-error"
      else
        bad "$tpl/$case_name-error" "status $status, stderr: $(cat "$tmp/err")"
      fi
    fi
  done
done

# The tokenizer_config.json path itself also works, and stdin as '-'.
out=$("$g" render --tokenizer "$d/templates/llama3/tokenizer_config.json" - <"$d/conversations/01_plain_user.json")
if [ "$out" = "$(cat "$d/expected-render/llama3/01_plain_user.txt")" ]; then ok stdin; else bad stdin "$out"; fi

echo '{"messages": [{"role": "user", "content": null}]}' >"$tmp/null.json"
"$g" render --tokenizer "$d/templates/qwen3" "$tmp/null.json" >/dev/null 2>"$tmp/err"
status=$?
if [ "$status" = 1 ] && grep -qE "line 20: 'None' has no attribute 'startswith'" "$tmp/err"; then ok null-content; else bad null-content "status $status: $(cat "$tmp/err")"; fi

"$g" render >/dev/null 2>"$tmp/err"
if [ $? = 2 ] && grep -q 'usage: gantry render' "$tmp/err"; then ok usage; else bad usage "$(cat "$tmp/err")"; fi
"$g" render --tokenizer "$tmp/nowhere" "$d/conversations/01_plain_user.json" >/dev/null 2>"$tmp/err"
if [ $? = 1 ] && grep -q 'cannot read' "$tmp/err"; then ok missing-tokenizer; else bad missing-tokenizer "$(cat "$tmp/err")"; fi
help=$("$g" render --help 2>&1)
if grep -q 'Usage: gantry render --tokenizer PATH CONVERSATION.json' <<<"$help"; then ok help; else bad help "$help"; fi
finish
