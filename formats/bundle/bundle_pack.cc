#include "formats/bundle/bundle_pack.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/status.h"
#include "formats/gguf/gguf.h"

namespace gantry::bundle {
namespace {

constexpr char kWeightsName[] = "model.gguf";
constexpr char kTokenizerJson[] = "tokenizer.json";
constexpr char kTokenizerConfig[] = "tokenizer_config.json";
constexpr uint32_t kDefaultMaxOutput = 4096;

absl::Status OsError(const std::string& what, const std::string& path) {
  int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::UnavailableError(message);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t limit) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return OsError("cannot open", path);
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f.get())) > 0) {
    data.append(buffer, n);
    if (data.size() > limit) return absl::InvalidArgumentError(absl::StrCat(path, " is larger than ", limit, " bytes"));
  }
  if (std::ferror(f.get())) return absl::DataLossError(absl::StrCat("read error in ", path));
  return data;
}

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wbx"), &std::fclose);
  if (!f) return OsError("cannot create", tmp);
  bool ok = std::fwrite(data.data(), 1, data.size(), f.get()) == data.size();
  ok = std::fflush(f.get()) == 0 && ok;
  ok = fsync(fileno(f.get())) == 0 && ok;
  f.reset();
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status status = OsError("cannot write", path);
    std::remove(tmp.c_str());
    return status;
  }
  return absl::OkStatus();
}

absl::Status CopyFile(const std::string& from, const std::string& to) {
  std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(from.c_str(), "rb"), &std::fclose);
  if (!in) return OsError("cannot open", from);
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(to.c_str(), "wbx"), &std::fclose);
  if (!out) return OsError("cannot create", to);
  std::vector<char> block(1 << 20);
  size_t n;
  while ((n = std::fread(block.data(), 1, block.size(), in.get())) > 0) {
    if (std::fwrite(block.data(), 1, n, out.get()) != n) return OsError("cannot write", to);
  }
  if (std::ferror(in.get())) return absl::DataLossError(absl::StrCat("read error in ", from));
  if (std::fflush(out.get()) != 0 || fsync(fileno(out.get())) != 0) return OsError("cannot write", to);
  return absl::OkStatus();
}

// Places `from` at `to`: a hard link when allowed and possible, else a copy.
absl::Status Place(const std::string& from, const std::string& to, bool copy) {
  if (!copy && link(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
  return CopyFile(from, to);
}

// Removes what a failed pack created.
class Cleanup {
 public:
  explicit Cleanup(std::string dir) : dir_(std::move(dir)) {}
  ~Cleanup() {
    if (done_) return;
    for (const std::string& f : files_) std::remove(f.c_str());
    if (created_dir_) rmdir(dir_.c_str());
  }
  void AddFile(std::string path) { files_.push_back(std::move(path)); }
  void set_created_dir() { created_dir_ = true; }
  void Done() { done_ = true; }

 private:
  std::string dir_;
  std::vector<std::string> files_;
  bool created_dir_ = false;
  bool done_ = false;
};

absl::Status PrepareOutDir(const std::string& dir, Cleanup* cleanup) {
  if (mkdir(dir.c_str(), 0755) == 0) {
    cleanup->set_created_dir();
    return absl::OkStatus();
  }
  if (errno != EEXIST) return OsError("cannot create", dir);
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), &closedir);
  if (!d) return absl::InvalidArgumentError(absl::StrCat(dir, " exists and is not a directory"));
  while (dirent* e = readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      return absl::InvalidArgumentError(absl::StrCat(dir, " is not empty; pack into a new directory"));
    }
  }
  return absl::OkStatus();
}

struct SelectedTemplate {
  std::string text;
  std::string source;  // "tokenizer_config.json" or "gguf"
  std::string name;    // "default" or the template's name
};

// The chat template from tokenizer_config.json: a string, or a list of
// {"name", "template"} objects. nullopt-like: empty text when the file has none.
absl::StatusOr<SelectedTemplate> TemplateFromConfig(const json::Value& config, const std::string& name) {
  SelectedTemplate t{"", kTokenizerConfig, name};
  const json::Value* v = config.Find("chat_template");
  if (v == nullptr || v->is_null()) return t;
  if (v->is_string()) {
    if (name != "default") {
      return absl::InvalidArgumentError(absl::StrCat(kTokenizerConfig, " has one unnamed chat template, not \"", name, "\""));
    }
    t.text = v->as_string();
    return t;
  }
  if (!v->is_array()) return absl::InvalidArgumentError(absl::StrCat(kTokenizerConfig, ": chat_template must be a string or a list"));
  std::vector<std::string> names;
  for (const json::Value& item : v->items()) {
    const json::Value* n = item.Find("name");
    const json::Value* text = item.Find("template");
    if (n == nullptr || !n->is_string() || text == nullptr || !text->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kTokenizerConfig, ": each chat_template entry needs \"name\" and \"template\" strings"));
    }
    if (n->as_string() == name) {
      t.text = text->as_string();
      return t;
    }
    names.push_back(n->as_string());
  }
  return absl::InvalidArgumentError(absl::StrCat(kTokenizerConfig, " has no chat template named \"", name,
                                                 "\" (it has: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<SelectedTemplate> TemplateFromGguf(const gguf::GgufFile& file, const std::string& name) {
  std::string key = name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
  SelectedTemplate t{"", "gguf", name};
  if (file.Find(key) == nullptr) return t;
  GANTRY_ASSIGN_OR_RETURN(t.text, file.GetString(key));
  return t;
}

absl::StatusOr<Asset> HashAsset(const std::string& dir, const std::string& name, const HashProgress& progress) {
  std::function<void(uint64_t, uint64_t)> report;
  if (progress) report = [&](uint64_t done, uint64_t total) { progress(name, done, total); };
  std::string path = dir + "/" + name;
  GANTRY_ASSIGN_OR_RETURN(std::string sha, Sha256File(path, report));
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return OsError("cannot stat", path);
  return Asset{name, static_cast<uint64_t>(st.st_size), sha};
}

}  // namespace

absl::StatusOr<Manifest> PackBundle(const PackOptions& o, const HashProgress& progress) {
  if (o.gguf_path.empty() || o.model.empty() || o.out_dir.empty()) {
    return absl::InvalidArgumentError("the GGUF file, the model name and the output directory are required");
  }
  if (!IsValidModelName(o.model)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model name \"", o.model, "\": expected 1..128 characters of [A-Za-z0-9._:/@+-]"));
  }
  if (!o.tool_protocol.empty() && !IsKnownToolProtocol(o.tool_protocol)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown tool protocol \"", o.tool_protocol,
                                                   "\" (known: ", KnownToolProtocols(), ", or none)"));
  }
  const std::string template_name = o.chat_template_name.empty() ? "default" : o.chat_template_name;
  if (!IsSafeAssetPath(template_name) || template_name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError("chat template name: expected characters of [A-Za-z0-9._-]");
  }
  if (!IsRegularFile(o.gguf_path)) return absl::NotFoundError(absl::StrCat("no GGUF file at ", o.gguf_path));
  GANTRY_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> gguf, OpenGguf(o.gguf_path));

  Manifest m;
  m.model = o.model;
  m.tool_protocol = o.tool_protocol;
  GANTRY_ASSIGN_OR_RETURN(m.architecture, gguf->GetString("general.architecture"));
  if (!IsValidModelName(m.architecture)) {
    return absl::InvalidArgumentError(absl::StrCat(o.gguf_path, ": odd general.architecture"));
  }
  uint64_t trained = 0;
  if (auto ctx = gguf->GetUint(m.architecture + ".context_length"); ctx.ok()) trained = *ctx;
  if (o.context_length == 0 && trained == 0) {
    return absl::InvalidArgumentError(absl::StrCat(o.gguf_path, " has no ", m.architecture,
                                                   ".context_length; pass the context size"));
  }
  if (trained != 0 && o.context_length > trained) {
    return absl::InvalidArgumentError(absl::StrCat("context ", o.context_length, " is larger than the ",
                                                   trained, " tokens the model was trained for"));
  }
  uint64_t context = o.context_length != 0 ? o.context_length : std::min<uint64_t>(trained, UINT32_MAX);
  m.context_length = static_cast<uint32_t>(context);
  m.default_max_tokens = o.max_output != 0 ? o.max_output : std::min(kDefaultMaxOutput, m.context_length);
  if (m.default_max_tokens > m.context_length) {
    return absl::InvalidArgumentError(absl::StrCat("default output cap ", m.default_max_tokens,
                                                   " is larger than the context (", m.context_length, ")"));
  }

  // The tokenizer and the template.
  SelectedTemplate chat;
  bool have_config = false;
  if (!o.tokenizer_dir.empty()) {
    if (!IsRegularFile(o.tokenizer_dir + "/" + kTokenizerJson)) {
      return absl::NotFoundError(absl::StrCat("no ", kTokenizerJson, " in ", o.tokenizer_dir));
    }
    std::string config_path = o.tokenizer_dir + "/" + kTokenizerConfig;
    if (IsRegularFile(config_path)) {
      have_config = true;
      GANTRY_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(config_path, 64u << 20));
      auto config = json::Parse(text);
      if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", config.status().message()));
      GANTRY_ASSIGN_OR_RETURN(chat, TemplateFromConfig(*config, template_name));
    }
  } else if (gguf->Find("tokenizer.ggml.model") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.gguf_path, " carries no tokenizer (tokenizer.ggml.model); pass a tokenizer directory"));
  }
  if (chat.text.empty()) {
    GANTRY_ASSIGN_OR_RETURN(chat, TemplateFromGguf(*gguf, template_name));
  }
  if (chat.text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no chat template \"", template_name, "\" in ",
        o.tokenizer_dir.empty() ? "" : absl::StrCat(o.tokenizer_dir, "/", kTokenizerConfig, " or "),
        o.gguf_path, " (tokenizer.chat_template)"));
  }
  gguf.reset();

  // Place and hash.
  Cleanup cleanup(o.out_dir);
  GANTRY_RETURN_IF_ERROR(PrepareOutDir(o.out_dir, &cleanup));
  auto place = [&](const std::string& from, const char* name) {
    std::string to = o.out_dir + "/" + name;
    cleanup.AddFile(to);
    return Place(from, to, o.copy);
  };
  GANTRY_RETURN_IF_ERROR(place(o.gguf_path, kWeightsName));
  if (!o.tokenizer_dir.empty()) {
    GANTRY_RETURN_IF_ERROR(place(o.tokenizer_dir + "/" + kTokenizerJson, kTokenizerJson));
    if (have_config) GANTRY_RETURN_IF_ERROR(place(o.tokenizer_dir + "/" + kTokenizerConfig, kTokenizerConfig));
  }
  cleanup.AddFile(o.out_dir + "/" + kChatTemplateName);
  GANTRY_RETURN_IF_ERROR(WriteFile(o.out_dir + "/" + kChatTemplateName, chat.text));

  GANTRY_ASSIGN_OR_RETURN(m.weights, HashAsset(o.out_dir, kWeightsName, progress));
  if (o.tokenizer_dir.empty()) {
    m.tokenizer_source = TokenizerSource::kGguf;
    m.tokenizer = m.weights;
  } else {
    m.tokenizer_source = TokenizerSource::kTokenizerJson;
    GANTRY_ASSIGN_OR_RETURN(m.tokenizer, HashAsset(o.out_dir, kTokenizerJson, progress));
    if (have_config) {
      GANTRY_ASSIGN_OR_RETURN(m.tokenizer_config, HashAsset(o.out_dir, kTokenizerConfig, progress));
    }
  }
  GANTRY_ASSIGN_OR_RETURN(m.chat_template, HashAsset(o.out_dir, kChatTemplateName, progress));
  m.chat_template_source = chat.source;
  m.chat_template_name = chat.name;
  m.identity_sha256 = ComputeIdentity(m);

  // The manifest last: a directory without bundle.json is visibly unfinished.
  cleanup.AddFile(o.out_dir + "/" + kManifestName);
  GANTRY_RETURN_IF_ERROR(WriteFile(o.out_dir + "/" + kManifestName, SerializeManifest(m)));
  cleanup.Done();
  return m;
}

}  // namespace gantry::bundle
