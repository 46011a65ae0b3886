// The bundle manifest (bundle.json): its fields, strict parsing, serialization, canonical
// form and identity hash. docs/bundle.md is the format's specification; this header is
// the code's contract. Nothing here touches the file system (see bundle.h for that).
//
// Canonical form: the manifest as a JSON object without its "identity_sha256" member,
// serialized with keys sorted by code point at every level, separators "," and ":",
// no whitespace, non-ASCII characters as UTF-8 (Python:
// json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False)).
// The identity is the lowercase hex SHA-256 of those bytes.
//
// Thread-safety: all functions are pure.
#ifndef GANTRY_FORMATS_BUNDLE_BUNDLE_MANIFEST_H_
#define GANTRY_FORMATS_BUNDLE_BUNDLE_MANIFEST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/json.h"

namespace gantry::bundle {

inline constexpr char kManifestName[] = "bundle.json";
inline constexpr char kFormat[] = "gantry.bundle/1";
inline constexpr char kChatTemplateName[] = "chat_template.jinja";
// Manifests are a few KiB; anything beyond this is not one.
inline constexpr size_t kMaxManifestBytes = 1 << 20;

// One file of the bundle: a relative path inside the bundle directory, its size and
// its SHA-256 (lowercase hex).
struct Asset {
  std::string path;
  uint64_t bytes = 0;
  std::string sha256;
};

// Where the tokenizer comes from: a Hugging Face tokenizer.json in the bundle, or the
// tokenizer.ggml.* metadata of the bundle's GGUF file.
enum class TokenizerSource { kTokenizerJson, kGguf };

struct Manifest {
  std::string model;         // the name clients ask for
  std::string architecture;  // GGUF general.architecture
  Asset weights;             // the GGUF file
  TokenizerSource tokenizer_source = TokenizerSource::kTokenizerJson;
  Asset tokenizer;  // tokenizer.json, or (kGguf) the same file as `weights`
  absl::optional<Asset> tokenizer_config;  // tokenizer_config.json, only with kTokenizerJson
  // "tokenizer_config.json" or "gguf": where the selected template was taken from.
  std::string chat_template_source;
  // Which template: "default" for the unnamed one, else the name of a named template.
  std::string chat_template_name;
  Asset chat_template;  // always chat_template.jinja
  std::string tool_protocol;  // one of kToolProtocols, or "" for none
  uint32_t context_length = 0;
  uint32_t default_max_tokens = 0;
  std::string identity_sha256;  // over the canonical form
};

// "gguf" / "tokenizer.json".
const char* TokenizerSourceName(TokenizerSource source);

// Whether `name` is a declared tool protocol Gantry knows ("" is not one).
bool IsKnownToolProtocol(absl::string_view name);
// "hermes_json, qwen3_coder_xml, llama31_json, mistral_tool_calls", for messages.
std::string KnownToolProtocols();

// Whether `path` is acceptable as an asset path: relative, 1..255 bytes, components of
// [A-Za-z0-9._-] only, no empty, "." or ".." component, at most 8 components.
bool IsSafeAssetPath(absl::string_view path);

// Whether `name` is an acceptable model name: 1..128 bytes of [A-Za-z0-9._:/@+-].
bool IsValidModelName(absl::string_view name);

// Parses and validates manifest text strictly: valid JSON (at most kMaxManifestBytes),
// an object with exactly the documented members (unknown members are errors), every
// member of its type, `format` equal to kFormat, safe asset paths, 64-hex hashes,
// a known tool protocol or "", 0 < default_max_tokens <= context_length < 2^32, and
// the rules between fields (tokenizer source "gguf" names the weights file, ...).
// It does NOT check identity_sha256 against the content (see ComputeIdentity).
// Errors: INVALID_ARGUMENT whose message starts with "bundle.json: " and names the
// member at fault.
absl::StatusOr<Manifest> ParseManifest(absl::string_view text);

// The manifest as a JSON object (with identity_sha256 when it is non-empty).
json::Value ManifestToJson(const Manifest& manifest);

// The canonical bytes (see the top of this file) of `manifest_json`, which must be an
// object; its identity_sha256 member, if any, is left out.
std::string CanonicalForm(const json::Value& manifest_json);

// SHA-256 (hex) of the canonical form of the manifest.
std::string ComputeIdentity(const Manifest& manifest);
std::string ComputeIdentity(const json::Value& manifest_json);

// The text written to bundle.json: ManifestToJson with identity_sha256 set to
// ComputeIdentity(), indented by 2, keys in the documented order, ending in "\n".
std::string SerializeManifest(const Manifest& manifest);

}  // namespace gantry::bundle

#endif  // GANTRY_FORMATS_BUNDLE_BUNDLE_MANIFEST_H_
