#!/usr/bin/env bash
# The SentencePiece GGUFs `gantry bundle make-test-model` writes (Mistral = reference
# "llama2", Gemma 3) are what llama.cpp reads: the peer's llama.cpp (vocab only) tokenizes every
# corpus case to the Hugging Face ids, with special tokens parsed and as text; and
# `gantry tokenize` on the same file gives those ids too (the 30 KB prompt).
set -u
source tests/lib/shtest.sh
g=cli/gantry
data=tests/data/tokenizer
peer=${GANTRY_LLAMA_PEER_DIR:-}
if [ -z "$peer" ] || [ ! -d "$peer/node_modules/node-llama-cpp" ] || [ ! -d "$peer/tokenizers" ]; then
  bad setup "GANTRY_LLAMA_PEER_DIR unset or not prepared: run through tests/run"
  finish
fi
tmp=${TEST_TMPDIR:-$(mktemp -d)}
for tok in llama2 gemma3; do
  model="$tmp/$tok.gguf"
  if ! out=$("$g" bundle make-test-model --tokenizer "$peer/tokenizers/$tok" --arch llama --n-layer 1 \
             --n-embd 64 --n-head 4 --n-head-kv 2 --n-ff 128 --tied -o "$model" 2>&1); then
    bad "$tok-write" "$out"
    continue
  fi
  report=$(timeout 300 node tokenizer-svc/tokenizer/spm_gguf_llama_check.mjs "$peer" "$model" \
           "$data/expected/$tok" "$data/corpus" 2>&1)
  for variant in ids ids_split_special; do
    n_ok=$(grep -c "^ok .* $variant\$" <<<"$report")
    if [ "$n_ok" = 22 ]; then ok "llama.cpp-$tok-$variant"; else
      bad "llama.cpp-$tok-$variant" "$n_ok/22: $(grep "^bad .* $variant " <<<"$report" | head -3) $(tail -c 300 <<<"$report")"
    fi
  done
  # One load of the GGUF through the CLI (the other cases: tokenizer_gguf_test).
  case_name=43_tool_prompt_30kb_qwen3
  got=$("$g" tokenize --tokenizer "$model" "$data/corpus/$case_name.txt" | tr -d ' \n')
  want=$(grep -o '"ids":\[[0-9,]*\]' "$data/expected/$tok/$case_name.json" | head -1 | sed 's/^"ids"://')
  if [ -n "$got" ] && [ "$got" = "$want" ]; then ok "gantry-$tok"; else bad "gantry-$tok" "differs from HF on $case_name"; fi
  rm -f "$model"
done
finish
