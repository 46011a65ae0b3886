#!/usr/bin/env bash
# `gantry ledger` as an operator runs it, against the Postgres of tests/run.
set -u
g=cli/gantry
[ -n "${GANTRY_TEST_PG_URL:-}" ] || { echo "FAIL: GANTRY_TEST_PG_URL unset: run through tests/run"; exit 1; }
db="t_cli_$$_$RANDOM"
server=${GANTRY_TEST_PG_URL%/*}
psql -q "$GANTRY_TEST_PG_URL" -c "CREATE DATABASE $db" || exit 1
url="$server/$db"
export GANTRY_HOME="$TEST_TMPDIR/home"
mkdir -p "$GANTRY_HOME"
source tests/lib/shtest.sh

# The owner sets the ledger up; the writer (append) logs in as the writer role.
wurl=$("$g" ledger setup --db "$url") && [ -f "$GANTRY_HOME/ledger.key" ] &&
  [ "$(stat -c %a "$GANTRY_HOME/ledger.key")" = 600 ] && [[ "$wurl" == postgresql://gantry_ledger_writer@* ]] &&
  ok setup || bad setup "$wurl"
out=$("$g" ledger setup --db "$url") && [ "$out" = "$wurl" ] && ok setup-again || bad setup-again "$out"
out=$("$g" ledger append --db "$url" --stream task_owner --type t --actor a 2>&1)
grep -q 'spooled' <<<"$out" && ok append-as-owner-refused || bad append-as-owner-refused "$out"
rm -f "$GANTRY_HOME"/spool/spool-*.log  # (that event never reached this ledger)

for i in 1 2 3 4 5; do
  out=$("$g" ledger append --db "$wurl" --stream task_cli --type tool.executed --actor sandbox \
        --payload "{\"i\": $i, \"gantry.bundle.identity_sha256\": \"abc\"}") || bad append "$out"
done
[[ "$out" == evt_*" seq 4 "* ]] && ok append-seq || bad append-seq "$out"

out=$("$g" ledger verify --db "$url"); st=$?
[ $st = 0 ] && grep -q '1 streams, 5 events, 0 broken' <<<"$out" && ok verify-clean || bad verify-clean "$st $out"
out=$("$g" ledger verify --db "$url" --key-file "$TEST_TMPDIR/none.key" 2>&1); st=$?
[ $st = 1 ] && grep -q 'ledger_key_missing\|ledger key' <<<"$out" && ok verify-needs-key || bad verify-needs-key "$st $out"

out=$("$g" ledger export --db "$url" --task task_cli); st=$?
if [ $st = 0 ] && grep -q '"format": "gantry.evidence.v1"' <<<"$out" && grep -q '"verified": true' <<<"$out" \
   && [ "$(grep -c '"event_id"' <<<"$out")" = 5 ] && grep -q '"identity_sha256": "abc"' <<<"$out"; then
  ok export
else
  bad export "$st $out"
fi
"$g" ledger export --db "$url" --task task_none >/dev/null 2>&1 && bad export-missing "exit 0" || ok export-missing

out=$("$g" ledger tail --db "$url" --from-start --limit 5 --type tool.)
[ "$(wc -l <<<"$out")" = 5 ] && grep -q '"seq":4' <<<"$out" && ok tail || bad tail "$out"

psql -q "$url" -c "SET session_replication_role = replica; UPDATE ledger_events SET actor = 'forged' WHERE seq = 2" || exit 1
out=$("$g" ledger verify --db "$url"); st=$?
[ $st = 1 ] && grep -q 'BROKEN stream task_cli seq 2 .*hash mismatch' <<<"$out" && ok verify-tampered || bad verify-tampered "$st $out"

out=$("$g" ledger append --db "$wurl" --stream s --type t --actor a --payload '[1]' 2>&1); st=$?
[ $st = 2 ] && grep -q 'JSON object' <<<"$out" && ok append-bad-payload || bad append-bad-payload "$st $out"
"$g" ledger frobnicate >/dev/null 2>&1; [ $? = 2 ] && ok unknown-verb || bad unknown-verb "not 2"
finish
