// Loads everything a worker serves from one bundle directory: verifies the bundle
// (every pinned hash; refuses on any mismatch), maps the GGUF, binds the model, builds
// the tokenizer and the chat template, and gathers the end-of-generation token ids.
//
// Thread-safety: immutable after Load(); shared by every slot.
#ifndef GANTRY_WORKER_SERVER_SERVING_H_
#define GANTRY_WORKER_SERVER_SERVING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "formats/bundle/bundle.h"
#include "worker/server/engine.h"

namespace gantry::server {

class LoadedBundle {
 public:
  // `script_path` "" = real sampling; otherwise the scripted test double (script.h).
  // Errors: those of bundle::LoadAndVerify (bundle_mismatch names the file and both
  // hashes), of the model, tokenizer and template loaders, and of Script::Load.
  static absl::StatusOr<std::unique_ptr<LoadedBundle>> Load(const std::string& dir,
                                                            const std::string& script_path = "");

  const ServingBundle& serving() const { return serving_; }
  const bundle::Bundle& bundle() const { return *bundle_; }

 private:
  std::unique_ptr<bundle::Bundle> bundle_;
  std::unique_ptr<gguf::GgufFile> gguf_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<jinja::ChatTemplate> template_;
  std::unique_ptr<Script> script_;
  ServingBundle serving_;
};

}  // namespace gantry::server

#endif  // GANTRY_WORKER_SERVER_SERVING_H_
