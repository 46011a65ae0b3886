// A bundle on disk: a directory holding bundle.json (the manifest, bundle_manifest.h)
// and the assets it lists. docs/bundle.md specifies the format and the verification
// rules; a worker serves a bundle only after LoadAndVerify() accepted it.
//
// Thread-safety: a Bundle is immutable after LoadAndVerify(); LoadAndVerify() itself may
// run concurrently for different (or the same) directories.
#ifndef GANTRY_FORMATS_BUNDLE_BUNDLE_H_
#define GANTRY_FORMATS_BUNDLE_BUNDLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/bundle.pb.h"
#include "formats/gguf/gguf.h"
#include "formats/bundle/bundle_manifest.h"

namespace gantry::bundle {

// Called while a large file is hashed: (asset path, bytes hashed so far, file size).
using HashProgress = std::function<void(const std::string&, uint64_t, uint64_t)>;

class Bundle {
 public:
  // The verified manifest.
  const Manifest& manifest() const { return manifest_; }
  // The bundle directory as given to LoadAndVerify().
  const std::string& dir() const { return dir_; }
  // The identity sent in READY, every FINAL and every ledger event.
  gantry::v1::BundleIdentity Identity() const;
  // Absolute-or-relative paths (dir + "/" + asset path) of the assets.
  std::string WeightsPath() const { return PathOf(manifest_.weights); }
  // tokenizer.json, or the GGUF file when the tokenizer source is "gguf".
  std::string TokenizerPath() const { return PathOf(manifest_.tokenizer); }
  std::string ChatTemplatePath() const { return PathOf(manifest_.chat_template); }
  std::string PathOf(const Asset& asset) const { return dir_ + "/" + asset.path; }

 private:
  friend absl::StatusOr<Bundle> LoadAndVerify(const std::string& dir, const HashProgress& progress);
  std::string dir_;
  Manifest manifest_;
};

// Reads `dir`/bundle.json, parses it strictly (ParseManifest), recomputes the identity
// over its canonical form, then for every asset checks that the path resolves to a
// regular file inside `dir` (a symlink is followed only when its target stays inside)
// and re-hashes the whole file. Also opens the GGUF and checks that its
// general.architecture equals the manifest's.
//
// Errors:
//   NOT_FOUND            `dir` or bundle.json does not exist;
//   INVALID_ARGUMENT     a malformed manifest (message names the member), an asset path
//                        that escapes the directory or is not a regular file, or a
//                        GGUF file that does not parse (reason "invalid_gguf");
//   FAILED_PRECONDITION  reason "bundle_mismatch": the recorded identity differs from the
//                        recomputed one (names bundle.json), or an asset's bytes differ
//                        from the manifest (names the file); the message carries
//                        "expected <hash>" and "actual <hash>";
//   other codes from the OS (PERMISSION_DENIED, DATA_LOSS) naming the file.
// `progress` may be null.
absl::StatusOr<Bundle> LoadAndVerify(const std::string& dir, const HashProgress& progress = nullptr);

// gguf::GgufFile::Open, with reason "invalid_gguf" on every INVALID_ARGUMENT (Open
// drops it when it prefixes the path).
absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenGguf(const std::string& path);

}  // namespace gantry::bundle

#endif  // GANTRY_FORMATS_BUNDLE_BUNDLE_H_
