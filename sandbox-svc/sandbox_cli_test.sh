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
rules=sandbox-svc/testdata/rules.yaml
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
check rules-allow 0 'hello'                                -- sandbox exec --workspace "$ws" --rules "$rules" -- env cat a.txt
check rules-deny  1 'DENIED rule:default-deny: /usr/bin/rm is not an allowed executable' -- sandbox exec --workspace "$ws" --rules "$rules" -- sh -c 'rm a.txt'
[ -f "$ws/a.txt" ] && ok rules-deny-no-effect || bad rules-deny-no-effect "a.txt removed"
if [ -x /usr/bin/git ]; then
  check rules-git 1 "DENIED rule:git-read: .*subcommand 'push'" -- sandbox exec --workspace "$ws" --rules "$rules" -- git push
else
  check rules-git 1 "DENIED rule:default-deny: git: not found" -- sandbox exec --workspace "$ws" --rules "$rules" -- git push
fi
check bad-rules   1 'cannot read rules file'                      -- sandbox exec --workspace "$ws" --rules /nonexistent -- true
finish
