#!/usr/bin/env bash
# Gantry's kernels against llama.cpp (node-llama-cpp, the peer) on the same GGUF files
# from `gantry bundle make-test-model`: both architectures, every weight type we write.
# Same prompt ids; top-5 log-probabilities at the last prompt position within the
# stated tolerance; greedy sequences identical over 32 steps for F32 and F16.
#
# Stated tolerances (max |logprob difference| over the peer's top 4, natural log):
#   f32, f16: 0.02 (llama.cpp keeps the KV cache in F16; we keep F32)
#   bf16: 0.05; q8_0: 0.15; q4_0: 0.25 (measured 2026-11-30: up to 0.028, 0.092, 0.159)
set -u
source tests/lib/shtest.sh
g=cli/gantry
compare=worker/model/compare_with_peer.py
peer=${GANTRY_LLAMA_PEER_DIR:-}
if [ -z "$peer" ] || [ ! -d "$peer/node_modules/node-llama-cpp" ]; then
  bad setup "GANTRY_LLAMA_PEER_DIR unset or not prepared: run through tests/run"
  finish
fi
tmp=${TEST_TMPDIR:-/tmp}
for spec in "qwen3 qwen3 --head-dim 32" "llama llama3"; do
  set -- $spec
  arch=$1 tok=$2; shift 2
  for pair in f32:0.02:32 f16:0.02:32 bf16:0.05:0 q8_0:0.15:0 q4_0:0.25:0; do
    IFS=: read -r wtype tol steps <<<"$pair"
    name="$arch-$wtype"
    model="$tmp/$name.gguf"
    "$g" bundle make-test-model --tokenizer "$peer/tokenizers/$tok" --arch "$arch" --n-layer 2 \
      --n-embd 64 --n-head 4 --n-head-kv 2 --n-ff 192 --wtype "$wtype" "$@" -o "$model" >/dev/null ||
      { bad "$name" "make-test-model failed"; continue; }
    (cd "$peer" && timeout 120 node llama_peer.mjs --model "$model" --n 32 --bench 0 --repeat 1 \
      2>/dev/null) >"$tmp/peer.json" || { bad "$name" "peer failed"; continue; }
    python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['prompt']['ids']))" \
      "$tmp/peer.json" >"$tmp/ids.json"
    "$g" generate --model "$model" --prompt-ids "@$tmp/ids.json" --n 32 --json >"$tmp/ours.json" ||
      { bad "$name" "gantry generate failed"; continue; }
    if verdict=$(python3 "$compare" "$tmp/ours.json" "$tmp/peer.json" "$tol" "$steps"); then
      ok "$name ($verdict)"
    else
      bad "$name" "$verdict"
    fi
    rm -f "$model"
  done
done
finish
