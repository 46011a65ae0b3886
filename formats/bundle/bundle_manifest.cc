#include "formats/bundle/bundle_manifest.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/status.h"

namespace gantry::bundle {
namespace {

constexpr const char* kToolProtocols[] = {"hermes_json", "qwen3_coder_xml", "llama31_json",
                                          "mistral_tool_calls"};
// JSON integers beyond 2^53 do not survive every reader; no file is that large.
constexpr int64_t kMaxBytes = int64_t{1} << 53;

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kManifestName, ": ", where, ": ", what));
}

bool IsHex64(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Checks that `object` is an object whose members are exactly `required` plus any of
// `optional`.
absl::Status CheckMembers(const json::Value& object, absl::string_view where,
                          const std::vector<absl::string_view>& required,
                          const std::vector<absl::string_view>& optional) {
  if (!object.is_object()) return Bad(where, "expected an object");
  std::set<std::string> seen;
  for (const auto& member : object.members()) {
    bool known = false;
    for (absl::string_view k : required) known = known || member.first == k;
    for (absl::string_view k : optional) known = known || member.first == k;
    if (!known) return Bad(where, absl::StrCat("unknown member \"", member.first, "\""));
    seen.insert(member.first);
  }
  for (absl::string_view k : required) {
    if (seen.count(std::string(k)) == 0) return Bad(where, absl::StrCat("missing member \"", k, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetString(const json::Value& object, absl::string_view where,
                                      absl::string_view key) {
  const json::Value* v = object.Find(key);
  if (v == nullptr || !v->is_string()) return Bad(absl::StrCat(where, key), "expected a string");
  return v->as_string();
}

absl::StatusOr<int64_t> GetInt(const json::Value& object, absl::string_view where,
                               absl::string_view key, int64_t min, int64_t max) {
  const json::Value* v = object.Find(key);
  absl::optional<int64_t> i = v != nullptr && v->is_integer() ? v->as_int64() : absl::nullopt;
  if (!i.has_value() || *i < min || *i > max) {
    return Bad(absl::StrCat(where, key), absl::StrCat("expected an integer in [", min, ", ", max, "]"));
  }
  return *i;
}

// An asset object: {"path", "bytes", "sha256"} plus `extra` members the caller reads.
absl::StatusOr<Asset> ParseAsset(const json::Value& parent, absl::string_view key,
                                 const std::vector<absl::string_view>& extra) {
  const json::Value* v = parent.Find(key);
  if (v == nullptr) return Bad(key, "missing");
  std::vector<absl::string_view> required = {"path", "bytes", "sha256"};
  required.insert(required.end(), extra.begin(), extra.end());
  GANTRY_RETURN_IF_ERROR(CheckMembers(*v, key, required, {}));
  std::string where = absl::StrCat(key, ".");
  Asset asset;
  GANTRY_ASSIGN_OR_RETURN(asset.path, GetString(*v, where, "path"));
  if (!IsSafeAssetPath(asset.path)) {
    return Bad(where + "path", absl::StrCat("\"", asset.path,
                                            "\" is not a safe relative path inside the bundle"));
  }
  GANTRY_ASSIGN_OR_RETURN(int64_t bytes, GetInt(*v, where, "bytes", 0, kMaxBytes));
  asset.bytes = static_cast<uint64_t>(bytes);
  GANTRY_ASSIGN_OR_RETURN(asset.sha256, GetString(*v, where, "sha256"));
  if (!IsHex64(asset.sha256)) return Bad(where + "sha256", "expected 64 lowercase hex digits");
  return asset;
}

json::Value AssetToJson(const Asset& asset, std::vector<json::Value::Member> extra = {}) {
  json::Value v = json::Value::EmptyObject();
  for (auto& member : extra) v.Set(std::move(member.first), std::move(member.second));
  v.Set("path", json::Value::String(asset.path));
  v.Set("bytes", json::Value::Int(static_cast<int64_t>(asset.bytes)));
  v.Set("sha256", json::Value::String(asset.sha256));
  return v;
}

}  // namespace

const char* TokenizerSourceName(TokenizerSource source) {
  return source == TokenizerSource::kGguf ? "gguf" : "tokenizer.json";
}

bool IsKnownToolProtocol(absl::string_view name) {
  for (const char* p : kToolProtocols) {
    if (name == p) return true;
  }
  return false;
}

std::string KnownToolProtocols() { return absl::StrJoin(kToolProtocols, ", "); }

bool IsSafeAssetPath(absl::string_view path) {
  if (path.empty() || path.size() > 255) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  if (parts.size() > 8) return false;
  for (absl::string_view part : parts) {
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
      if (!ok) return false;
    }
  }
  return true;
}

bool IsValidModelName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              absl::StrContains("._:/@+-", c);
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text) {
  if (text.size() > kMaxManifestBytes) {
    return Bad("top level", absl::StrCat("larger than ", kMaxManifestBytes, " bytes"));
  }
  auto parsed = json::Parse(text);
  if (!parsed.ok()) return Bad("top level", parsed.status().message());
  const json::Value& root = *parsed;
  GANTRY_RETURN_IF_ERROR(CheckMembers(
      root, "top level",
      {"format", "model", "architecture", "context_length", "default_max_tokens", "tool_protocol",
       "weights", "tokenizer", "chat_template", "identity_sha256"},
      {"tokenizer_config"}));
  Manifest m;
  GANTRY_ASSIGN_OR_RETURN(std::string format, GetString(root, "", "format"));
  if (format != kFormat) {
    return Bad("format", absl::StrCat("\"", format, "\" is not \"", kFormat, "\""));
  }
  GANTRY_ASSIGN_OR_RETURN(m.model, GetString(root, "", "model"));
  if (!IsValidModelName(m.model)) {
    return Bad("model", "expected 1..128 characters of [A-Za-z0-9._:/@+-]");
  }
  GANTRY_ASSIGN_OR_RETURN(m.architecture, GetString(root, "", "architecture"));
  if (!IsValidModelName(m.architecture)) {
    return Bad("architecture", "expected 1..128 characters of [A-Za-z0-9._:/@+-]");
  }
  GANTRY_ASSIGN_OR_RETURN(int64_t context, GetInt(root, "", "context_length", 1, UINT32_MAX));
  m.context_length = static_cast<uint32_t>(context);
  GANTRY_ASSIGN_OR_RETURN(int64_t max_tokens, GetInt(root, "", "default_max_tokens", 1, UINT32_MAX));
  if (max_tokens > context) return Bad("default_max_tokens", "larger than context_length");
  m.default_max_tokens = static_cast<uint32_t>(max_tokens);
  GANTRY_ASSIGN_OR_RETURN(m.tool_protocol, GetString(root, "", "tool_protocol"));
  if (!m.tool_protocol.empty() && !IsKnownToolProtocol(m.tool_protocol)) {
    return Bad("tool_protocol", absl::StrCat("unknown protocol \"", m.tool_protocol,
                                             "\" (known: ", KnownToolProtocols(), ", or \"\")"));
  }

  GANTRY_ASSIGN_OR_RETURN(m.weights, ParseAsset(root, "weights", {}));
  GANTRY_ASSIGN_OR_RETURN(m.tokenizer, ParseAsset(root, "tokenizer", {"source"}));
  GANTRY_ASSIGN_OR_RETURN(std::string source, GetString(*root.Find("tokenizer"), "tokenizer.", "source"));
  if (source == "gguf") {
    m.tokenizer_source = TokenizerSource::kGguf;
    if (m.tokenizer.path != m.weights.path || m.tokenizer.sha256 != m.weights.sha256 ||
        m.tokenizer.bytes != m.weights.bytes) {
      return Bad("tokenizer", "source \"gguf\" must name the weights file, its size and hash");
    }
  } else if (source == "tokenizer.json") {
    m.tokenizer_source = TokenizerSource::kTokenizerJson;
    if (m.tokenizer.path == m.weights.path) return Bad("tokenizer.path", "names the weights file");
  } else {
    return Bad("tokenizer.source", absl::StrCat("\"", source, "\" is not \"tokenizer.json\" or \"gguf\""));
  }
  if (root.Find("tokenizer_config") != nullptr) {
    if (m.tokenizer_source == TokenizerSource::kGguf) {
      return Bad("tokenizer_config", "only allowed with tokenizer source \"tokenizer.json\"");
    }
    GANTRY_ASSIGN_OR_RETURN(m.tokenizer_config, ParseAsset(root, "tokenizer_config", {}));
  }

  GANTRY_ASSIGN_OR_RETURN(m.chat_template, ParseAsset(root, "chat_template", {"source", "name"}));
  const json::Value& chat = *root.Find("chat_template");
  GANTRY_ASSIGN_OR_RETURN(m.chat_template_source, GetString(chat, "chat_template.", "source"));
  if (m.chat_template_source != "gguf" && m.chat_template_source != "tokenizer_config.json") {
    return Bad("chat_template.source", absl::StrCat("\"", m.chat_template_source,
                                                    "\" is not \"tokenizer_config.json\" or \"gguf\""));
  }
  if (m.chat_template_source == "tokenizer_config.json" && !m.tokenizer_config.has_value()) {
    return Bad("chat_template.source", "\"tokenizer_config.json\" but the bundle has no tokenizer_config");
  }
  GANTRY_ASSIGN_OR_RETURN(m.chat_template_name, GetString(chat, "chat_template.", "name"));
  if (!IsSafeAssetPath(m.chat_template_name) || absl::StrContains(m.chat_template_name, "/")) {
    return Bad("chat_template.name", "expected 1..255 characters of [A-Za-z0-9._-]");
  }
  if (m.chat_template.path != kChatTemplateName) {
    return Bad("chat_template.path", absl::StrCat("must be \"", kChatTemplateName, "\""));
  }

  // Distinct roles are distinct files (the GGUF may double as the tokenizer, above).
  std::set<std::string> paths = {m.weights.path, m.chat_template.path};
  if (m.tokenizer_source == TokenizerSource::kTokenizerJson) paths.insert(m.tokenizer.path);
  if (m.tokenizer_config) paths.insert(m.tokenizer_config->path);
  size_t expected = 2 + (m.tokenizer_source == TokenizerSource::kTokenizerJson) +
                    (m.tokenizer_config.has_value() ? 1 : 0);
  if (paths.size() != expected || paths.count(kManifestName) != 0) {
    return Bad("top level", "two assets share one path, or an asset is named bundle.json");
  }

  GANTRY_ASSIGN_OR_RETURN(m.identity_sha256, GetString(root, "", "identity_sha256"));
  if (!IsHex64(m.identity_sha256)) return Bad("identity_sha256", "expected 64 lowercase hex digits");
  return m;
}

json::Value ManifestToJson(const Manifest& m) {
  json::Value v = json::Value::EmptyObject();
  v.Set("format", json::Value::String(kFormat));
  v.Set("model", json::Value::String(m.model));
  v.Set("architecture", json::Value::String(m.architecture));
  v.Set("context_length", json::Value::Int(m.context_length));
  v.Set("default_max_tokens", json::Value::Int(m.default_max_tokens));
  v.Set("tool_protocol", json::Value::String(m.tool_protocol));
  v.Set("weights", AssetToJson(m.weights));
  v.Set("tokenizer", AssetToJson(m.tokenizer, {{"source", json::Value::String(
                                                             TokenizerSourceName(m.tokenizer_source))}}));
  if (m.tokenizer_config) v.Set("tokenizer_config", AssetToJson(*m.tokenizer_config));
  v.Set("chat_template",
        AssetToJson(m.chat_template, {{"source", json::Value::String(m.chat_template_source)},
                                      {"name", json::Value::String(m.chat_template_name)}}));
  if (!m.identity_sha256.empty()) v.Set("identity_sha256", json::Value::String(m.identity_sha256));
  return v;
}

std::string CanonicalForm(const json::Value& manifest_json) {
  json::Value copy = manifest_json;
  auto& members = copy.members();
  for (auto it = members.begin(); it != members.end();) {
    it = it->first == "identity_sha256" ? members.erase(it) : it + 1;
  }
  json::DumpOptions options;
  options.sort_keys = true;
  options.item_separator = ",";
  options.key_separator = ":";
  return json::Dump(copy, options);
}

std::string ComputeIdentity(const json::Value& manifest_json) {
  return Sha256Hex(CanonicalForm(manifest_json));
}

std::string ComputeIdentity(const Manifest& manifest) {
  return ComputeIdentity(ManifestToJson(manifest));
}

std::string SerializeManifest(const Manifest& manifest) {
  Manifest copy = manifest;
  copy.identity_sha256 = ComputeIdentity(manifest);
  json::DumpOptions options;
  options.indent = 2;
  return json::Dump(ManifestToJson(copy), options) + "\n";
}

}  // namespace gantry::bundle
