#include "formats/bundle/bundle.h"

#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/status.h"
#include "formats/gguf/gguf.h"

namespace gantry::bundle {
namespace {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(realpath(path.c_str(), nullptr), &std::free);
  if (!resolved) {
    int err = errno;
    std::string message = absl::StrCat(path, ": ", std::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  return std::string(resolved.get());
}

absl::StatusOr<std::string> ReadManifest(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no manifest: ", path));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  if (static_cast<uint64_t>(st.st_size) > kMaxManifestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than ", kMaxManifestBytes, " bytes: not a manifest"));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot open ", path));
  std::string text(kMaxManifestBytes + 1, '\0');
  size_t n = std::fread(&text[0], 1, text.size(), f.get());
  if (std::ferror(f.get())) return absl::DataLossError(absl::StrCat("read error in ", path));
  text.resize(n);
  return text;
}

absl::Status Mismatch(const std::string& file, const std::string& what, const std::string& expected,
                      const std::string& actual) {
  return ReasonError("bundle_mismatch", absl::StrCat(file, ": ", what, ": expected ", expected,
                                                     ", actual ", actual));
}

// Resolves `asset` inside `real_dir` and checks that it is a regular file there.
absl::StatusOr<std::string> ResolveAsset(const std::string& dir, const std::string& real_dir,
                                         const Asset& asset) {
  // ParseManifest already refused "..", absolute and odd paths; this catches symlinks.
  std::string joined = dir + "/" + asset.path;
  struct stat st;
  if (lstat(joined.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("bundle asset ", asset.path, " is missing (", joined, ")"));
  }
  GANTRY_ASSIGN_OR_RETURN(std::string real, RealPath(joined));
  if (!absl::StartsWith(real, real_dir + "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle asset ", asset.path, " resolves outside the bundle directory"));
  }
  if (stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("bundle asset ", asset.path, " is not a regular file"));
  }
  return real;
}

absl::Status VerifyAsset(const std::string& dir, const std::string& real_dir, const Asset& asset,
                         const HashProgress& progress) {
  GANTRY_ASSIGN_OR_RETURN(std::string real, ResolveAsset(dir, real_dir, asset));
  std::function<void(uint64_t, uint64_t)> report;
  if (progress) report = [&](uint64_t done, uint64_t total) { progress(asset.path, done, total); };
  GANTRY_ASSIGN_OR_RETURN(std::string actual, Sha256File(real, report));
  if (actual != asset.sha256) return Mismatch(asset.path, "sha256", asset.sha256, actual);
  // Equal hashes with different sizes cannot happen short of a SHA-256 collision, but the
  // size is part of the manifest, so it is checked too.
  struct stat st;
  if (stat(real.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) != asset.bytes) {
    return Mismatch(asset.path, "size", absl::StrCat(asset.bytes), absl::StrCat(st.st_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenGguf(const std::string& path) {
  auto file = gguf::GgufFile::Open(path);
  if (file.ok() || file.status().code() != absl::StatusCode::kInvalidArgument ||
      !ReasonOf(file.status()).empty()) {
    return file;
  }
  return ReasonError("invalid_gguf", file.status().message());
}

gantry::v1::BundleIdentity Bundle::Identity() const {
  gantry::v1::BundleIdentity id;
  id.set_model(manifest_.model);
  id.set_identity_sha256(manifest_.identity_sha256);
  id.set_architecture(manifest_.architecture);
  id.set_weights_sha256(manifest_.weights.sha256);
  id.set_tokenizer_sha256(manifest_.tokenizer.sha256);
  id.set_chat_template_sha256(manifest_.chat_template.sha256);
  id.set_tool_protocol(manifest_.tool_protocol);
  id.set_context_length(manifest_.context_length);
  id.set_default_max_tokens(manifest_.default_max_tokens);
  return id;
}

absl::StatusOr<Bundle> LoadAndVerify(const std::string& dir, const HashProgress& progress) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no such bundle directory: ", dir));
  if (!S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(dir, " is not a directory"));
  GANTRY_ASSIGN_OR_RETURN(std::string real_dir, RealPath(dir));
  const std::string manifest_path = dir + "/" + kManifestName;
  if (lstat(manifest_path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(manifest_path, " is a symlink; it must be a file"));
  }
  GANTRY_ASSIGN_OR_RETURN(std::string text, ReadManifest(manifest_path));
  auto manifest = ParseManifest(text);
  if (!manifest.ok()) {
    return absl::Status(manifest.status().code(), absl::StrCat(dir, "/", manifest.status().message()));
  }
  // Identity first: it is cheap, and an edited manifest is named as such.
  auto raw = json::Parse(text);  // cannot fail after ParseManifest succeeded
  if (!raw.ok()) return raw.status();
  const std::string actual_identity = ComputeIdentity(*raw);
  if (actual_identity != manifest->identity_sha256) {
    return Mismatch(kManifestName, "identity_sha256", manifest->identity_sha256, actual_identity);
  }

  const Manifest& m = *manifest;
  GANTRY_RETURN_IF_ERROR(VerifyAsset(dir, real_dir, m.weights, progress));
  if (m.tokenizer_source == TokenizerSource::kTokenizerJson) {
    GANTRY_RETURN_IF_ERROR(VerifyAsset(dir, real_dir, m.tokenizer, progress));
  }
  if (m.tokenizer_config) GANTRY_RETURN_IF_ERROR(VerifyAsset(dir, real_dir, *m.tokenizer_config, progress));
  GANTRY_RETURN_IF_ERROR(VerifyAsset(dir, real_dir, m.chat_template, progress));

  // The hashes pin the bytes; this pins the manifest's description of them.
  GANTRY_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> gguf,
                          OpenGguf(dir + "/" + m.weights.path));
  auto arch = gguf->GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  if (*arch != m.architecture) {
    return absl::InvalidArgumentError(absl::StrCat(kManifestName, ": architecture \"", m.architecture,
                                                   "\" but ", m.weights.path, " says \"", *arch, "\""));
  }

  Bundle bundle;
  bundle.dir_ = dir;
  bundle.manifest_ = std::move(manifest).value();
  return bundle;
}

}  // namespace gantry::bundle
