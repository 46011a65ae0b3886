#!/usr/bin/env bash
# `gantry sandbox exec` as an admin runs it: output, exit status, denials, grants.
set -u
g=cli/gantry
source tests/lib/shtest.sh
if [ "$(id -u)" != 0 ]; then
  bad must-run-as-root "the sandbox tests need root (CI runs them as root on Debian 12)"
  finish
fi
ws=${TEST_TMPDIR:-$(mktemp -d)}/cli_ws
rm -rf "$ws"; mkdir -p "$ws/out"; echo hello >"$ws/a.txt"; chown -R 4244:4244 "$ws"
rules=(--rules sandbox-svc/testdata/policy.yaml --principal dev)
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
check help        0 'Usage: gantry sandbox exec'           -- sandbox --help
check no-argv     2 "missing '-- ARGV"                     -- sandbox exec --workspace "$ws"
check no-ws       2 'workspace is required'                -- sandbox exec -- true
check cat         0 'hello'                                -- sandbox exec --workspace "$ws" -- cat a.txt
check status-line 0 'outcome=RAN exit=0 signal=0 resolved=/usr/bin/cat' -- sandbox exec --workspace "$ws" -- cat a.txt
check exit-code   3 'outcome=RAN exit=3'                   -- sandbox exec --workspace "$ws" -- sh -c 'exit 3'
check read-only   2 'Read-only file system'                -- sandbox exec --workspace "$ws" -- sh -c 'echo x > a.txt'
[ "$(cat "$ws/a.txt")" = hello ] && ok read-only-unchanged || bad read-only-unchanged "a.txt changed"
check allow-write 0 'outcome=RAN exit=0'                   -- sandbox exec --workspace "$ws" --allow-write 'out/**' -- sh -c 'echo x > out/f'
[ "$(cat "$ws/out/f")" = x ] && ok allow-write-landed || bad allow-write-landed "out/f missing"
check timeout     1 'outcome=TIMED_OUT'                    -- sandbox exec --workspace "$ws" --wall-ms 300 -- sleep 5
# Command rules from an access policy file: the grants of principal `dev`.
check rules-allow 0 'hello'                                -- sandbox exec --workspace "$ws" "${rules[@]}" -- env cat a.txt
check rules-operand 1 "DENIED rule:grants\[0\]\.commands\[0\]: .*\(/etc/passwd\) matches none" -- sandbox exec --workspace "$ws" "${rules[@]}" -- cat ../etc/passwd
check rules-deny  1 "DENIED rule:default_deny: no grant of 'dev' names executable '/usr/bin/rm'" -- sandbox exec --workspace "$ws" "${rules[@]}" -- sh -c 'rm a.txt'
[ -f "$ws/a.txt" ] && ok rules-deny-no-effect || bad rules-deny-no-effect "a.txt removed"
if [ -x /usr/bin/git ]; then
  check rules-git 1 "DENIED rule:grants\[0\]\.commands\[3\]: .*subcommand 'push'" -- sandbox exec --workspace "$ws" "${rules[@]}" -- git push
else
  check rules-git 1 "DENIED rule:default_deny: git: not found" -- sandbox exec --workspace "$ws" "${rules[@]}" -- git push
fi
check rules-other-principal 1 "DENIED rule:default_deny: 'ops' is not a user or service account" -- sandbox exec --workspace "$ws" --rules sandbox-svc/testdata/policy.yaml --principal ops -- cat a.txt
check rules-needs-principal 2 '--rules and --principal go together' -- sandbox exec --workspace "$ws" --rules sandbox-svc/testdata/policy.yaml -- true
check bad-rules   1 'nonexistent'                          -- sandbox exec --workspace "$ws" --rules /nonexistent --principal dev -- true
printf 'version: 1\nbogus: 1\n' >"$ws.bad.yaml"
check bad-policy  1 'bad.yaml:2:1: .*bogus'                 -- sandbox exec --workspace "$ws" --rules "$ws.bad.yaml" --principal dev -- true
finish
