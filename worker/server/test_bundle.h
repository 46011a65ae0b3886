// Test-only: small real bundles (make-test-model GGUF + the Qwen3 tokenizer from
// $GANTRY_REFERENCE_DIR, packed), built once per test binary.
#ifndef GANTRY_WORKER_SERVER_TEST_BUNDLE_H_
#define GANTRY_WORKER_SERVER_TEST_BUNDLE_H_

#include <string>

#include "absl/status/statusor.h"

namespace gantry::server {

// Makes (once) a qwen3 test model and packs it twice under TEST_TMPDIR: with the
// hermes_json tool protocol and with none. Returns the bundle directory.
absl::StatusOr<std::string> TestBundleDirForTest(bool with_tool_protocol);

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_TEST_BUNDLE_H_
