#!/usr/bin/env bash
# `gantry tokenize` / `gantry detokenize` as a user runs them, on the tiny byte-level
# tokenizer (the fuzz seed): ids, specials parsed or as text, round trip, exit statuses.
set -u
g=cli/gantry
dir="${TEST_TMPDIR:-$(mktemp -d)}/tiny"
mkdir -p "$dir"
cp tests/fuzz/corpus/tokenizer_json/tiny_byte_level.json "$dir/tokenizer.json"
fail=0
expect() {  # expect NAME WANT GOT
  if [ "$2" != "$3" ]; then echo "FAIL $1: got '$3', want '$2'"; fail=1; else echo "ok   $1"; fi
}
expect parsed '[261,117,115,101,114]' "$(printf '<|im_start|>user' | "$g" tokenize --tokenizer "$dir")"
expect as-text '[60,124,105,109,95,115,116,97,114,116,124,62]' \
  "$(printf '<|im_start|>' | "$g" tokenize --tokenizer "$dir" --split-special -)"
printf ' the in' >"$dir/in.txt"
expect file '[258,260]' "$("$g" tokenize --tokenizer "$dir" "$dir/in.txt")"
expect add-special '[258,260]' "$("$g" tokenize --tokenizer "$dir" --add-special "$dir/in.txt")"
expect detokenize ' the in<|im_start|>' "$(echo '[258,260,261]' | "$g" detokenize --tokenizer "$dir")"
"$g" tokenize >/dev/null 2>&1; expect no-tokenizer 2 $?
"$g" tokenize --tokenizer "$dir" --bogus >/dev/null 2>&1; expect bad-option 2 $?
printf 'GGUF\3\0\0\0' >"$dir/m.gguf"
"$g" tokenize --tokenizer "$dir/m.gguf" </dev/null >/dev/null 2>"$dir/err"; expect gguf 1 $?
grep -q 'GGUF' "$dir/err"; expect gguf-message 0 $?
printf '\xff' | "$g" tokenize --tokenizer "$dir" >/dev/null 2>&1; expect invalid-utf8 1 $?
echo '[1, -2]' | "$g" detokenize --tokenizer "$dir" >/dev/null 2>&1; expect bad-ids 1 $?
echo '[999999]' | "$g" detokenize --tokenizer "$dir" >/dev/null 2>&1; expect unknown-id 1 $?
exit $fail
