#include "worker/server/test_bundle.h"

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "formats/bundle/bundle_pack.h"
#include "formats/testmodel/test_model.h"

namespace gantry::server {

absl::StatusOr<std::string> TestBundleDirForTest(bool with_tool_protocol) {
  static std::mutex mu;
  static bool made = false;
  std::lock_guard<std::mutex> lock(mu);
  const char* ref = std::getenv("GANTRY_REFERENCE_DIR");
  if (!ref) return absl::FailedPreconditionError("GANTRY_REFERENCE_DIR is not set: run through tests/run");
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string base = absl::StrCat(tmp ? tmp : "/tmp", "/test-bundles");
  const std::string tokenizer = absl::StrCat(ref, "/tokenizers/qwen3");
  if (!made) {
    std::error_code ignored;  // a missing folder is fine; create_directories reports the rest
    std::filesystem::remove_all(base, ignored);
    std::filesystem::create_directories(base, ignored);
    testmodel::TestModelOptions o;
    o.tokenizer_dir = tokenizer;
    o.arch = "qwen3";
    o.n_layer = 1;
    o.n_embd = 64;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.head_dim = 32;  // a multiple of 32: the Q8_0 KV cache's tests run on it too
    o.n_ff = 128;
    o.context_length = 512;
    GANTRY_RETURN_IF_ERROR(testmodel::MakeTestModel(o, base + "/model.gguf").status());
    for (bool tools : {true, false}) {
      bundle::PackOptions p;
      p.gguf_path = base + "/model.gguf";
      p.model = tools ? "test-qwen3" : "test-qwen3-notools";
      p.tokenizer_dir = tokenizer;
      p.tool_protocol = tools ? "hermes_json" : "";
      p.context_length = 512;
      p.max_output = 64;
      p.out_dir = base + (tools ? "/with-tools" : "/without-tools");
      GANTRY_RETURN_IF_ERROR(bundle::PackBundle(p).status());
    }
    made = true;
  }
  return base + (with_tool_protocol ? "/with-tools" : "/without-tools");
}

}  // namespace gantry::server
