#!/usr/bin/env bash
# llama.cpp (node-llama-cpp, the peer) loads every model `gantry bundle make-test-model`
# writes: both architectures, every weight type we write, tied and untied, byte-level and
# SentencePiece vocabularies; and it tokenizes the built-in chat prompt exactly like the
# Hugging Face reference with the vocabulary we carried over.
set -u
source tests/lib/shtest.sh
g=cli/gantry
peer=${GANTRY_LLAMA_PEER_DIR:-}
if [ -z "$peer" ] || [ ! -d "$peer/node_modules/node-llama-cpp" ]; then
  bad setup "GANTRY_LLAMA_PEER_DIR unset or not prepared: run through tests/run"
  finish
fi
tmp=${TEST_TMPDIR:-/tmp}
for arch in qwen3 llama; do
  tok=$arch; [ "$arch" = llama ] && tok=llama3
  for wtype in f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k q4_k_m; do
    # K-quant rows are whole super-blocks of 256.
    if [[ "$wtype" == *_k* ]]; then
      size=(--n-embd 256 --n-ff 256); [ "$arch" = qwen3 ] && size+=(--head-dim 128)
    else
      size=(--n-embd 64 --n-ff 128); [ "$arch" = qwen3 ] && size+=(--head-dim 32)
    fi
    # Tying the head is independent of the weight type: tied variants for a few types.
    ties=("")
    case "$wtype" in f16|q8_0|q4_k) ties+=(--tied) ;; esac
    for tied in "${ties[@]}"; do
      name="$arch-$wtype${tied:+-tied}"
      model="$tmp/$name.gguf"
      out=$("$g" bundle make-test-model --tokenizer "$peer/tokenizers/$tok" --arch "$arch" \
            --n-layer 1 --n-head 4 --n-head-kv 2 "${size[@]}" --wtype "$wtype" $tied \
            -o "$model" 2>&1) || { bad "$name" "make-test-model: $out"; continue; }
      report=$(cd "$peer" && timeout 120 node llama_peer.mjs --model "$model" --tokenizer "tokenizers/$tok" \
               --n 4 --bench 0 --repeat 1 2>&1)
      if grep -q '"reference_ids_match": true' <<<"$report" && grep -q '"hit_eos"' <<<"$report"; then
        ok "$name"
      else
        bad "$name" "$(tail -c 600 <<<"$report")"
      fi
      rm -f "$model"
    done
  done
done
# Bad options are usage errors, not crashes.
"$g" bundle make-test-model --tokenizer "$peer/tokenizers/qwen3" --arch gpt9 -o "$tmp/x.gguf" >/dev/null 2>&1
[ $? = 1 ] && ok bad-arch || bad bad-arch "exit status"
# SentencePiece vocabularies (Mistral = "llama2", Gemma 3) on the llama architecture.
for tok in llama2 gemma3; do
  model="$tmp/llama-$tok.gguf"
  out=$("$g" bundle make-test-model --tokenizer "$peer/tokenizers/$tok" --arch llama --n-layer 1 \
        --n-embd 64 --n-head 4 --n-head-kv 2 --n-ff 128 --wtype f16 --tied -o "$model" 2>&1) ||
    { bad "llama-$tok" "make-test-model: $out"; continue; }
  report=$(cd "$peer" && timeout 120 node llama_peer.mjs --model "$model" --tokenizer "tokenizers/$tok" \
           --n 4 --bench 0 --repeat 1 2>&1)
  if grep -q '"reference_ids_match": true' <<<"$report"; then ok "llama-$tok"; else
    bad "llama-$tok" "$(tail -c 600 <<<"$report")"
  fi
  rm -f "$model"
done
"$g" bundle make-test-model --tokenizer "$peer/tokenizers/qwen3" --wtype q4_k --n-embd 64 -o "$tmp/x.gguf" 2>&1 |
  grep -q 'multiples of 256' && ok k-quant-width-refused || bad k-quant-width-refused "no clear error"
finish
