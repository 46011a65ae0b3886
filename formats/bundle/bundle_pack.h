// Making a bundle (`gantry bundle pack`): places a GGUF file, optionally a Hugging Face
// tokenizer directory, and the selected chat template into a new directory, hashes
// them and writes bundle.json. docs/bundle.md describes the result.
//
// Thread-safety: PackBundle is a pure function of its options and the files it reads;
// two calls must not write the same output directory.
#ifndef GANTRY_FORMATS_BUNDLE_BUNDLE_PACK_H_
#define GANTRY_FORMATS_BUNDLE_BUNDLE_PACK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "formats/bundle/bundle.h"
#include "formats/bundle/bundle_manifest.h"

namespace gantry::bundle {

struct PackOptions {
  std::string gguf_path;      // required
  std::string model;          // required: the name clients ask for
  std::string tokenizer_dir;  // tokenizer.json (+ tokenizer_config.json); "" = the GGUF's
  std::string tool_protocol;  // "" = none declared
  uint32_t context_length = 0;  // 0 = the GGUF's <arch>.context_length
  uint32_t max_output = 0;      // 0 = min(4096, context_length)
  // Which template of a tokenizer_config.json list, or which tokenizer.chat_template.NAME
  // of the GGUF; "" or "default" = the default one.
  std::string chat_template_name;
  bool copy = false;  // copy the assets even where a hard link would do
  std::string out_dir;  // must not exist, or be an empty directory
};

// Makes the bundle and returns its manifest (identity_sha256 set). Assets are hard-linked
// into out_dir when possible (same file system, not `copy`), else copied; the template
// is written as chat_template.jinja. On failure, files this call created are removed.
// Errors: INVALID_ARGUMENT for bad options (unknown tool protocol, bad model name, a
// context larger than the GGUF's, max_output > context), a GGUF without a tokenizer
// when no tokenizer_dir is given, no chat template anywhere, or a non-empty out_dir;
// NOT_FOUND for missing inputs (names them); INVALID_ARGUMENT "invalid_gguf" for a bad
// GGUF; UNAVAILABLE / PERMISSION_DENIED when writing fails. `progress` may be null.
absl::StatusOr<Manifest> PackBundle(const PackOptions& options, const HashProgress& progress = nullptr);

}  // namespace gantry::bundle

#endif  // GANTRY_FORMATS_BUNDLE_BUNDLE_PACK_H_
