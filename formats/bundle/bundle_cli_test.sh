#!/usr/bin/env bash
# `gantry bundle pack` / `gantry bundle verify` as a user runs them: pack a small
# make-test-model GGUF with the Qwen 3 tokenizer ($GANTRY_REFERENCE_DIR), verify, tamper
# with each asset and with the manifest, and check exit statuses and messages.
set -u
source tests/lib/shtest.sh
g=cli/gantry
ref=${GANTRY_REFERENCE_DIR:-}
if [ -z "$ref" ] || [ ! -f "$ref/tokenizers/qwen3/tokenizer.json" ]; then
  bad setup "GANTRY_REFERENCE_DIR unset or without tokenizers/qwen3 (bazel test --test_env=GANTRY_REFERENCE_DIR=...)"
  finish
fi
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/bundle_cli.XXXXXX")
tok=$ref/tokenizers/qwen3
"$g" bundle make-test-model --tokenizer "$tok" --n-embd 64 --n-layer 1 -o "$tmp/m.gguf" >/dev/null 2>"$tmp/err" ||
  { bad make-test-model "$(cat "$tmp/err")"; finish; }

# Pack with the tokenizer directory (copies: this test flips bytes in the bundle).
out=$("$g" bundle pack --gguf "$tmp/m.gguf" --model qwen3-test --tokenizer-dir "$tok" \
      --tool-protocol hermes_json --context 1024 --max-output 128 --copy -o "$tmp/b" 2>"$tmp/err")
[ $? = 0 ] && ok pack || bad pack "$(cat "$tmp/err")"
grep -q '"identity_sha256": "[0-9a-f]\{64\}"' <<<"$out" && ok pack-prints-identity || bad pack-prints-identity "$out"
[ ! -s "$tmp/err" ] && ok no-progress-when-not-a-tty || bad no-progress-when-not-a-tty "$(cat "$tmp/err")"
for f in bundle.json model.gguf tokenizer.json tokenizer_config.json chat_template.jinja; do
  [ -f "$tmp/b/$f" ] || bad "has-$f" missing
done
grep -q im_start "$tmp/b/chat_template.jinja" && ok template-from-config || bad template-from-config "no im_start"
out=$("$g" bundle verify "$tmp/b" 2>"$tmp/err")
[ $? = 0 ] && ok verify || bad verify "$(cat "$tmp/err")"
grep -q '"tool_protocol": "hermes_json"' <<<"$out" && grep -q '"context_length": 1024' <<<"$out" &&
  ok verify-prints-identity || bad verify-prints-identity "$out"

# Identity: recompute the canonical form independently (python3) when available.
if command -v python3 >/dev/null; then
  want=$(python3 -c '
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
rec = m.pop("identity_sha256")
c = json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
print("ok" if hashlib.sha256(c).hexdigest() == rec else "mismatch")' "$tmp/b/bundle.json")
  [ "$want" = ok ] && ok identity-matches-python || bad identity-matches-python "$want"
fi

# --progress draws a bar on stderr even when it is not a TTY.
"$g" bundle verify --progress "$tmp/b" >/dev/null 2>"$tmp/err"
grep -q 'hashing model.gguf .*100%' "$tmp/err" && ok progress-bar || bad progress-bar "$(head -c 300 "$tmp/err")"

# Flip one byte in each asset: exit 1, the file and both hashes named.
for f in model.gguf tokenizer.json tokenizer_config.json chat_template.jinja; do
  want=$(sha256sum "$tmp/b/$f" | cut -d' ' -f1)
  python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=1; open(p,"wb").write(b)' "$tmp/b/$f"
  got=$(sha256sum "$tmp/b/$f" | cut -d' ' -f1)
  "$g" bundle verify "$tmp/b" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc = 1 ] && grep -q "bundle_mismatch" "$tmp/err" && grep -q "$f: sha256: expected $want, actual $got" "$tmp/err"; then
    ok "tampered-$f"
  else
    bad "tampered-$f" "rc $rc: $(cat "$tmp/err")"
  fi
  python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=1; open(p,"wb").write(b)' "$tmp/b/$f"
done
"$g" bundle verify "$tmp/b" >/dev/null 2>&1 && ok restored || bad restored "verify failed after undoing the flips"

# Edit the manifest: an identity mismatch naming bundle.json.
cp "$tmp/b/bundle.json" "$tmp/manifest.orig"
sed -i 's/"context_length": 1024/"context_length": 1000/' "$tmp/b/bundle.json"
"$g" bundle verify "$tmp/b" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && grep -q 'bundle.json: identity_sha256: expected [0-9a-f]\{64\}, actual [0-9a-f]\{64\}' "$tmp/err" &&
  ok edited-manifest || bad edited-manifest "rc $rc: $(cat "$tmp/err")"
cp "$tmp/manifest.orig" "$tmp/b/bundle.json"

# Hostile manifest: a path out of the bundle.
sed 's#"path": "chat_template.jinja"#"path": "../manifest.orig"#' "$tmp/manifest.orig" >"$tmp/b/bundle.json"
"$g" bundle verify "$tmp/b" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q 'chat_template.path' "$tmp/err" && ok dotdot-path || bad dotdot-path "$(cat "$tmp/err")"
printf 'not json' >"$tmp/b/bundle.json"
"$g" bundle verify "$tmp/b" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q 'INVALID_ARGUMENT' "$tmp/err" && ok bad-json || bad bad-json "$(cat "$tmp/err")"
cp "$tmp/manifest.orig" "$tmp/b/bundle.json"

# GGUF-only bundle: the template from tokenizer.chat_template, default hard links.
out=$("$g" bundle pack --gguf "$tmp/m.gguf" --model qwen3-gguf -o "$tmp/g" 2>"$tmp/err")
[ $? = 0 ] && ok pack-gguf-only || bad pack-gguf-only "$(cat "$tmp/err")"
grep -q '"source": "gguf"' "$tmp/g/bundle.json" && [ ! -e "$tmp/g/tokenizer.json" ] &&
  ok gguf-tokenizer-source || bad gguf-tokenizer-source "$(cat "$tmp/g/bundle.json")"
"$g" bundle verify "$tmp/g" >/dev/null 2>&1 && ok verify-gguf-only || bad verify-gguf-only "exit $?"

# The GGUF's own tokenizer gives the ids of tokenizer.json (gantry tokenize accepts a GGUF).
printf 'Hello, world! <|im_start|>user\n caf\xc3\xa9 12345 <tool_call>' >"$tmp/text"
a=$("$g" tokenize --tokenizer "$tmp/g/model.gguf" "$tmp/text" 2>&1)
b=$("$g" tokenize --tokenizer "$tok" "$tmp/text" 2>&1)
[ "$a" = "$b" ] && [ "${a:0:1}" = "[" ] && ok tokenize-gguf || bad tokenize-gguf "gguf $a, tokenizer.json $b"
a=$("$g" tokenize --split-special --tokenizer "$tmp/g/model.gguf" "$tmp/text" 2>&1)
b=$("$g" tokenize --split-special --tokenizer "$tok" "$tmp/text" 2>&1)
[ "$a" = "$b" ] && ok tokenize-gguf-split-special || bad tokenize-gguf-split-special "gguf $a, tokenizer.json $b"

# Usage errors (2) and refusals (1).
"$g" bundle pack --gguf "$tmp/m.gguf" -o "$tmp/x" >/dev/null 2>&1; [ $? = 2 ] && ok pack-needs-model || bad pack-needs-model "exit"
"$g" bundle pack --gguf "$tmp/m.gguf" --model m --bogus 1 -o "$tmp/x" >/dev/null 2>&1; [ $? = 2 ] && ok pack-bad-option || bad pack-bad-option "exit"
"$g" bundle pack --gguf "$tmp/m.gguf" --model m --tool-protocol json_magic -o "$tmp/x" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q 'unknown tool protocol' "$tmp/err" && ok unknown-tool-protocol || bad unknown-tool-protocol "$(cat "$tmp/err")"
"$g" bundle pack --gguf "$tmp/m.gguf" --model m -o "$tmp/b" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q 'not empty' "$tmp/err" && ok non-empty-out || bad non-empty-out "$(cat "$tmp/err")"
"$g" bundle verify >/dev/null 2>&1; [ $? = 2 ] && ok verify-needs-dir || bad verify-needs-dir "exit"
"$g" bundle verify "$tmp/none" >/dev/null 2>&1; [ $? = 1 ] && ok verify-missing-dir || bad verify-missing-dir "exit"
"$g" bundle frobnicate >/dev/null 2>&1; [ $? = 2 ] && ok unknown-verb || bad unknown-verb "exit"
rm -rf "$tmp"
finish
