#!/usr/bin/env bash
# `gantry policy` as an admin runs it, on the demo policy of deploy/.
set -u
g=cli/gantry
demo=deploy/policy.example.yaml
tmp=${TEST_TMPDIR:-$(mktemp -d)}
source tests/lib/shtest.sh
check() {  # check NAME EXPECTED_STATUS GREP_PATTERN -- ARGS...
  local name=$1 want=$2 pattern=$3; shift 4
  local out status
  out=$("$g" "$@" 2>&1); status=$?
  if [ "$status" != "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    bad "$name" "status $status (want $want), output: $out"
  else
    ok "$name"
  fi
}
hash=$(sha256sum "$demo" | cut -c1-64)

check help            0 'gantry policy check FILE'          -- policy --help
check listed          0 'policy +check, explain and hash'   -- --help
check check-demo      0 'policy.example.yaml: ok: 5 principals, 2 groups, 2 models' -- policy check "$demo"
check hash-demo       0 "^$hash\$"                          -- policy hash "$demo"
check explain-clamp   0 'clamp: max_tokens 50000 -> 4096'   -- policy explain "$demo" --user dana --model qwen3-8b --param max_tokens=50000
check explain-rule    0 'rule: grants\[0\]\.models\.qwen3-8b\.max_tokens' -- policy explain "$demo" --user dana --model qwen3-8b --param max_tokens=50000
check explain-key     0 'principal: admin'                  -- policy explain "$demo" --key gantry-demo-admin --model qwen3-8b --param max_tokens=10
check explain-badkey  0 'reason: unknown_principal'         -- policy explain "$demo" --key nope --model qwen3-8b
check explain-tool    0 'reason: tool_arguments_not_allowed' -- policy explain "$demo" --user dana --tool read_file --args '{"path": "/etc/passwd"}'
check explain-toolok  0 'verdict: allow'                    -- policy explain "$demo" --user dana --tool read_file --args '{"path":"/workspace/a.txt"}'
check explain-cmd     0 'verdict: deny'                     -- policy explain "$demo" --user harness --command "/usr/bin/git push origin"
check explain-cmdok   0 'verdict: allow'                    -- policy explain "$demo" --user harness --command "/usr/bin/git log"
# Relative operands as the sandbox asks: against the command's working directory.
check explain-cwd     0 'verdict: allow'                    -- policy explain "$demo" --user dana --command "/usr/bin/cat src/a.c" --cwd /workspace
check explain-cwd-out 0 "operand '../etc/passwd' \(/etc/passwd\)" -- policy explain "$demo" --user dana --command "/usr/bin/cat ../etc/passwd" --cwd /workspace
check explain-nocwd   0 'verdict: deny'                     -- policy explain "$demo" --user dana --command "/usr/bin/cat src/a.c"
check explain-hash    0 "policy_sha256: $hash"              -- policy explain "$demo" --user dana --model qwen3-8b
check explain-usage   2 'explain needs --key K or --user U' -- policy explain "$demo" --model qwen3-8b
check explain-badparm 2 'temperature: expected a number'    -- policy explain "$demo" --user dana --param temperature=hot
# Arguments that are not one JSON object are decided, as the router decides such a call.
check explain-badjson 0 'reason: tool_arguments_not_allowed' -- policy explain "$demo" --user dana --tool read_file --args '{"a":'
check explain-dupargs 0 "appears twice|duplicate key 'path'" -- policy explain "$demo" --user dana --tool read_file --args '{"path":"/workspace/a","path":"/etc/shadow"}'
check explain-offer   0 'stripped: write_file' -- policy explain "$demo" --user dana --model qwen3-8b --offer-tool read_file --offer-tool write_file
check unknown-sub     2 "unknown subcommand 'lint'"         -- policy lint "$demo"

# An invalid file: the error names file, line, column and YAML path; the exit status is 1.
sed 's/temperature: {min: 0, max: 1.5, action: reject}/temperature: 0.7/' "$demo" >"$tmp/bad.yaml"
check check-bad       1 '^bad.yaml:[0-9]+:[0-9]+: grants\[0\]\.models\.qwen3-8b\.temperature: expected a mapping' -- policy check "$tmp/bad.yaml"
check hash-bad        1 'bad.yaml:'                         -- policy hash "$tmp/bad.yaml"
# A failing inline example fails the check.
sed 's/clamps: {max_tokens: 4096}/clamps: {max_tokens: 4000}/' "$demo" >"$tmp/example.yaml"
check check-example   1 'example failed: expected clamp'    -- policy check "$tmp/example.yaml"
check check-missing   1 'no/such.yaml'                      -- policy check no/such.yaml

# Budgets: 0 means zero and no limit is spelled `unlimited`; the minimum over the
# defaults and the grants is what explain shows (a grant's 0 wins, its number lowers an
# unlimited default, nothing raises one).
sed -e 's/^    tokens_per_day: 200000$/    tokens_per_day: unlimited/' \
    -e 's/^    requests_per_minute: 30$/    requests_per_minute: unlimited/' \
    -e 's/^    concurrent_requests: 2$/    concurrent_requests: 0/' "$demo" >"$tmp/zero.yaml"
check check-zero      0 'zero.yaml: ok: 5 principals'       -- policy check "$tmp/zero.yaml"
check budgets-dana    0 '^budgets: tokens_per_day=unlimited tokens_per_month=4000000 requests_per_minute=unlimited concurrent_requests=0 request_seconds=1800$' -- policy explain "$tmp/zero.yaml" --user dana --model qwen3-8b
check budgets-admin   0 '^budgets: tokens_per_day=150000 tokens_per_month=4000000 requests_per_minute=unlimited concurrent_requests=0 request_seconds=1800$' -- policy explain "$tmp/zero.yaml" --user admin --model qwen3-8b
check budgets-nightly 0 '^budgets: tokens_per_day=unlimited tokens_per_month=4000000 requests_per_minute=10 concurrent_requests=0 request_seconds=1800$' -- policy explain "$tmp/zero.yaml" --user nightly --model qwen3-8b
# Anything else is refused with file:line:column and the YAML path.
sed 's/^    tokens_per_day: 200000$/    tokens_per_day: "200000"/' "$demo" >"$tmp/quoted.yaml"
check budget-quoted   1 "^quoted.yaml:23:21: defaults\.budgets\.tokens_per_day: expected an integer in \[0, 9007199254740992\] or unlimited, got a quoted string \('200000'\)\$" -- policy check "$tmp/quoted.yaml"
sed 's/^      tokens_per_day: 150000$/      tokens_per_day: Unlimited/' "$demo" >"$tmp/word.yaml"
check budget-word     1 "^word.yaml:114:23: grants\[2\]\.budgets\.tokens_per_day: expected an integer in \[0, 9007199254740992\] or unlimited, got a scalar \('Unlimited'\)\$" -- policy check "$tmp/word.yaml"
sed 's/^      concurrent_requests: 1$/      concurrent_requests: -1/' "$demo" >"$tmp/negative.yaml"
check budget-negative 1 "^negative.yaml:130:28: grants\[4\]\.budgets\.concurrent_requests: expected an integer in \[0, 9007199254740992\] or unlimited, got a scalar \('-1'\)\$" -- policy check "$tmp/negative.yaml"
finish
