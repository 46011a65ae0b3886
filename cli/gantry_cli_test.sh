#!/usr/bin/env bash
# The gantry binary as a user runs it: help, per-command help, exit statuses.
set -u
g=cli/gantry
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
check help          0 'Commands:'                  -- --help
check help-lists    0 'errors +list the stable'    -- --help
check no-args       2 'Usage: gantry <command>'    --
check unknown       2 "unknown command 'frobnicate'" -- frobnicate
check version       0 'worker protocol GNTW01 \(version 1\)' -- version
check version-help  0 'Usage: gantry version'      -- version --help
check help-version  0 'Usage: gantry version'      -- help version
check version-args  2 'takes no arguments'         -- version extra
check errors        0 'context_length_exceeded +INVALID_ARGUMENT +400' -- errors
check errors-json   0 '"reason":"queue_full","code":"RESOURCE_EXHAUSTED","http":429,"retryable":true' -- errors --json
check errors-bad    2 "unknown option '--xml'"     -- errors --xml
# Every error reason the code can return is documented in docs/protocol.md, with the
# same canonical code and HTTP status.
missing=""
while read -r reason code http _; do
  grep -qF "| \`$reason\` | $code | $http |" docs/protocol.md || missing+=" $reason($code $http)"
done < <("$g" errors | awk '{print $1, $2, $3}')
[ -z "$missing" ] && ok errors-documented || bad errors-documented "not in docs/protocol.md:$missing"
# CURVE key pairs: modes, never overwritten, fingerprint as the router logs it.
keys=${TEST_TMPDIR:-$(mktemp -d)}/router
check keys-gen      0 'fingerprint [0-9a-f]{16}$'  -- keys gen-curve --out "$keys"
modes="$(stat -c %a "$keys.key") $(stat -c %a "$keys.pub")"
[ "$modes" = "600 644" ] && ok keys-modes || bad keys-modes "modes $modes"
check keys-exists   1 'exists'                     -- keys gen-curve --out "$keys"
check keys-usage    2 'usage: gantry keys gen-curve' -- keys gen-curve
made=$("$g" keys gen-curve --out "$keys.2")
grep -q "fingerprint $("$g" keys fingerprint "$keys.2.pub")\$" <<<"$made" \
  && ok keys-fingerprint || bad keys-fingerprint "gen-curve and fingerprint disagree: $made"
printf '# a key file\nnot a key\n' >"$keys.bad"
check keys-bad-pub  1 'invalid_key_file.*line 2'   -- keys fingerprint "$keys.bad"
finish
