#!/usr/bin/env bash
# Gantry's kernels against llama.cpp (node-llama-cpp, the peer) on the same GGUF files
# from `gantry bundle make-test-model`: both architectures, every weight type we write.
# Same prompt ids; top-5 log-probabilities at the last prompt position within the
# stated tolerance; greedy sequences identical over 32 steps for F32 and F16.
#
# Stated tolerances (max |logprob difference| over the peer's top 4, natural log):
#   f32, f16: 0.02 (llama.cpp keeps the KV cache in F16; we keep F32)
#   bf16: 0.05; q8_0: 0.15; q4_0: 0.25 (measured 2026-11-30: up to 0.028, 0.092, 0.159)
#   q4_k, q5_k, q6_k: 0.2; q4_k_m: 0.1 (measured 2026-11-30: up to 0.133, 0.101, 0.132,
#   0.037; q8_0 at the same width: 0.102)
# K-quant models are 256 wide (rows of whole super-blocks; qwen3 keys 128 long, so the
# query width 512 differs from the model width).
# Our dequantization against llama.cpp's: F32 models whose token embedding alone is a
# K-quant (llama.cpp dequantizes the embedding rows, then runs in F32), so they agree as
# F32 does: 0.02 and 32 greedy steps (measured: up to 0.0035, all 32 steps).
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
# weights[+embedding type]:tolerance:greedy steps required
cases="f32:0.02:32 f16:0.02:32 bf16:0.05:0 q8_0:0.15:0 q4_0:0.25:0 q4_k:0.2:0 q5_k:0.2:0 q6_k:0.2:0 q4_k_m:0.1:0"
for arch in qwen3 llama; do
  tok=$arch; [ "$arch" = llama ] && tok=llama3
  more=""; [ "$arch" = llama ] && more="f32+q4_k:0.02:32 f32+q5_k:0.02:32 f32+q6_k:0.02:32"
  for case in $cases $more; do
    IFS=: read -r types tol steps <<<"$case"
    wtype=${types%%+*}
    embd=(); name="$arch-$wtype"
    if [ "$types" != "$wtype" ]; then embd=(--embd-type "${types#*+}"); name="$name-embd-${types#*+}"; fi
    if [[ "$types" == *_k* ]]; then
      size=(--n-embd 256 --n-ff 512); [ "$arch" = qwen3 ] && size+=(--head-dim 128)
    else
      size=(--n-embd 64 --n-ff 192); [ "$arch" = qwen3 ] && size+=(--head-dim 32)
    fi
    model="$tmp/$name.gguf"
    "$g" bundle make-test-model --tokenizer "$peer/tokenizers/$tok" --arch "$arch" --n-layer 2 \
      --n-head 4 --n-head-kv 2 "${size[@]}" --wtype "$wtype" "${embd[@]}" -o "$model" >/dev/null ||
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
