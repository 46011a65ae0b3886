# Sourced by end-to-end shell tests that start Gantry's real processes on loopback.
#   pids+=($!)                     processes to kill (-9) when the test exits
#   free_port                      an ephemeral TCP port on 127.0.0.1
#   new_worker_ipc VAR             sets VAR to ipc://DIR/workers.sock, DIR a fresh directory
#                                  only this user can open (mode 0700; removed on exit):
#                                  where a router without CURVE accepts plain workers
#                                  (docs/router.md, "Worker identity")
#   make_test_bundle DIR CONTEXT MAX_OUTPUT [HEAD_DIM]
#                                  a 1-layer qwen3 make-test-model with the demo Qwen3
#                                  tokenizer and template, packed as model "gantry-demo"
#                                  with the hermes_json tool protocol into DIR
#   write_models FILE DIR CONTEXT MAX_OUTPUT
#                                  the router's --models file serving that bundle
#   key_sha256 KEY                 the hex SHA-256 a policy stores for KEY
# Needs `g` (the gantry binary) and `tmp` set, and tests/lib/shtest.sh sourced.
pids=()
ipc_dirs=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ ${#ipc_dirs[@]} -eq 0 ] || rm -rf "${ipc_dirs[@]}"
}
trap cleanup EXIT
# Under /tmp, not $tmp: an AF_UNIX socket path holds at most 107 bytes.
new_worker_ipc() {
  local dir
  dir=$(mktemp -d /tmp/gantry-w.XXXXXX) && chmod 700 "$dir" || return 1
  ipc_dirs+=("$dir")
  printf -v "$1" '%s' "ipc://$dir/workers.sock"
}
key_sha256() { printf %s "$1" | sha256sum | cut -c1-64; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

make_test_bundle() {
  local dir=$1 context=$2 max_output=$3 head_dim=${4:-16} tok="$tmp/tok"
  mkdir -p "$tok"
  xz -dc deploy/demo/qwen3-tokenizer/tokenizer.json.xz >"$tok/tokenizer.json"
  cp deploy/demo/qwen3-tokenizer/tokenizer_config.json "$tok/"
  "$g" bundle make-test-model --tokenizer "$tok" --arch qwen3 --n-layer 1 --n-embd 64 --n-head 4 \
    --n-head-kv 2 --head-dim "$head_dim" --n-ff 128 --ctx "$context" -o "$tmp/m.gguf" >/dev/null || return 1
  "$g" bundle pack --gguf "$tmp/m.gguf" --model gantry-demo --tokenizer-dir "$tok" \
    --tool-protocol hermes_json --context "$context" --max-output "$max_output" -o "$dir" >/dev/null
}

write_models() {
  cat >"$1" <<JSON
{"models": [{"name": "gantry-demo", "tokenizer_dir": "$2", "context_length": $3,
             "tool_protocol": "hermes_json", "default_max_tokens": $4}]}
JSON
}
