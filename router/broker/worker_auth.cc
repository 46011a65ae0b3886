#include "router/broker/worker_auth.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/curve_keys.h"
#include "common/error_codes.h"
#include "common/file.h"
#include "common/log.h"
#include "common/zmq_io.h"

namespace gantry::broker {
namespace {

constexpr int64_t kRefusalLogIntervalMs = 10000;
constexpr size_t kMaxRememberedKeys = 1024;

absl::Status ListError(size_t line_no, absl::string_view message) {
  return ReasonError("invalid_key_file", absl::StrCat("line ", line_no, ": ", message));
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool IsModelNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '@' || c == '+';
}

bool IsBundleIdentity(absl::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The values of `models=` / `bundles=`: "*" (any: kAnyWorkerGrant) or a comma-separated
// list of valid, distinct names.
absl::Status ParseValues(size_t line_no, absl::string_view field, absl::string_view values,
                         bool bundles, std::set<std::string>* out) {
  if (values == kAnyWorkerGrant) {
    out->insert(kAnyWorkerGrant);
    return absl::OkStatus();
  }
  for (absl::string_view value : absl::StrSplit(values, ',')) {
    bool valid = bundles ? IsBundleIdentity(value)
                         : !value.empty() && value.size() <= kMaxModelNameBytes &&
                               std::all_of(value.begin(), value.end(), IsModelNameChar);
    if (!valid) {
      return ListError(line_no, absl::StrCat(
          field, ": '", value.substr(0, 80), "' is not ",
          bundles ? "a bundle identity (64 lowercase hex digits)"
                  : "a model name (1-128 of A-Z a-z 0-9 . _ - : / @ +)"));
    }
    if (!out->insert(std::string(value)).second) {
      return ListError(line_no, absl::StrCat(field, ": '", value, "' listed twice"));
    }
  }
  return absl::OkStatus();
}

// One entry line: KEY, `models=...` and `bundles=...` (both required, in either order),
// separated by blanks.
absl::StatusOr<WorkerGrant> ParseEntry(size_t line_no, absl::string_view line) {
  std::vector<absl::string_view> words =
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  WorkerGrant grant;
  auto key = DecodeCurveKeyZ85(words[0]);
  if (!key.ok()) {
    return ListError(line_no, absl::StrCat("expected a 40-character Z85 key or a '#' comment: ",
                                           key.status().message()));
  }
  grant.key_z85 = std::string(words[0]);
  bool seen_models = false, seen_bundles = false;
  for (size_t i = 1; i < words.size(); ++i) {
    absl::string_view word = words[i];
    size_t eq = word.find('=');
    absl::string_view name = word.substr(0, eq);
    bool* seen = name == "models" ? &seen_models : name == "bundles" ? &seen_bundles : nullptr;
    if (eq == absl::string_view::npos || seen == nullptr) {
      return ListError(line_no, absl::StrCat("unknown field '", word.substr(0, 40),
                                             "'; expected models=... or bundles=..."));
    }
    if (*seen) return ListError(line_no, absl::StrCat(name, "= given twice"));
    *seen = true;
    absl::Status values = ParseValues(line_no, name, word.substr(eq + 1), name == "bundles",
                                      name == "models" ? &grant.models : &grant.bundles);
    if (!values.ok()) return values;
  }
  // Fail closed: a key says what it may serve; "anything" is spelled out, never implied.
  if (!seen_models || !seen_bundles) {
    return ListError(line_no, absl::StrCat(
        "the key needs ", !seen_models ? "models=" : "bundles=",
        ": name what this worker may serve (models=NAME[,NAME...] "
        "bundles=SHA256[,SHA256...], the bundle identities of `gantry bundle verify`), "
        "or models=* bundles=* for anything"));
  }
  return grant;
}

bool SameGrant(const WorkerGrant& a, const WorkerGrant& b) {
  return a.models == b.models && a.bundles == b.bundles;
}

std::string Describe(const std::set<std::string>& names) { return absl::StrJoin(names, ","); }

}  // namespace

absl::StatusOr<std::vector<WorkerGrant>> ParseWorkerAllowList(absl::string_view text) {
  if (text.size() > kMaxKeyFileBytes) {
    return ReasonError("invalid_key_file",
                       absl::StrCat("larger than ", kMaxKeyFileBytes, " bytes"));
  }
  std::map<std::string, std::pair<WorkerGrant, size_t>> by_key;  // key -> (grant, line)
  size_t line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = raw;
    while (!line.empty() && IsBlank(line.front())) line.remove_prefix(1);
    while (!line.empty() && IsBlank(line.back())) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    auto grant = ParseEntry(line_no, line);
    if (!grant.ok()) return grant.status();
    auto [it, inserted] = by_key.emplace(grant->key_z85, std::make_pair(*grant, line_no));
    if (!inserted && !SameGrant(it->second.first, *grant)) {
      return ListError(line_no, absl::StrCat("the key of line ", it->second.second,
                                             " again, with other grants"));
    }
  }
  if (by_key.empty()) return ReasonError("invalid_key_file", "the allow-list holds no key");
  std::vector<WorkerGrant> out;
  for (auto& [key, entry] : by_key) out.push_back(std::move(entry.first));
  return out;
}

absl::StatusOr<std::vector<WorkerGrant>> ReadWorkerAllowListFile(const std::string& path) {
  auto text = ReadFileToString(path, kMaxKeyFileBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return text.status();
    return ReasonError("invalid_key_file", absl::StrCat(path, ": ", text.status().message()));
  }
  auto grants = ParseWorkerAllowList(*text);
  if (!grants.ok()) {
    return ReasonError("invalid_key_file", absl::StrCat(path, ": ", grants.status().message()));
  }
  return grants;
}

bool GrantPermits(const WorkerGrant& grant, const std::string& model,
                  const std::string& bundle_sha256) {
  // An empty set permits nothing: "any" is only ever the explicit kAnyWorkerGrant.
  return (grant.models.count(kAnyWorkerGrant) > 0 || grant.models.count(model) > 0) &&
         (grant.bundles.count(kAnyWorkerGrant) > 0 || grant.bundles.count(bundle_sha256) > 0);
}

WorkerAuth::WorkerAuth(zmq::socket_t zap, ZapAllowList allow,
                       std::map<std::string, WorkerGrant> by_fingerprint)
    : zap_(std::move(zap)), allow_(std::move(allow)), by_fingerprint_(std::move(by_fingerprint)) {}

const WorkerGrant* WorkerAuth::GrantFor(const std::string& fingerprint) const {
  auto it = by_fingerprint_.find(fingerprint);
  return it == by_fingerprint_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::unique_ptr<WorkerAuth>> WorkerAuth::Install(
    zmq::context_t& context, zmq::socket_t& router, const CurveServerOptions& options) {
  if (!CurveSupported()) {
    return absl::UnimplementedError("this libzmq was built without CURVE support");
  }
  auto secret = DecodeCurveKeyZ85(options.secret_key_z85);
  if (!secret.ok()) return secret.status();
  std::map<std::string, WorkerGrant> by_fingerprint;
  std::vector<std::string> keys;
  for (const auto& grant : options.workers) {
    auto decoded = DecodeCurveKeyZ85(grant.key_z85);
    if (!decoded.ok()) return decoded.status();
    const std::string fingerprint = CurveKeyFingerprint(*decoded);
    if (!by_fingerprint.emplace(fingerprint, grant).second) {
      return ReasonError("invalid_key_file",
                         absl::StrCat("two worker keys share the fingerprint ", fingerprint));
    }
    keys.push_back(grant.key_z85);
  }
  zmq::socket_t zap;
  try {
    zap = zmq::socket_t(context, zmq::socket_type::rep);
    zap.set(zmq::sockopt::linger, 0);
    zap.bind(kZapEndpoint);
    router.set(zmq::sockopt::curve_server, 1);
    router.set(zmq::sockopt::curve_secretkey, *secret);
    router.set(zmq::sockopt::zap_domain, kWorkerZapDomain);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("CURVE/ZAP setup: ", e.what()));
  }
  Log(LogLevel::kInfo, "broker.curve_enabled", {{"allowed_keys", absl::StrCat(keys.size())}});
  for (const auto& [fingerprint, grant] : by_fingerprint) {
    if (grant.models.count(kAnyWorkerGrant) == 0 && grant.bundles.count(kAnyWorkerGrant) == 0) {
      continue;
    }
    Log(LogLevel::kWarning, "broker.worker_key_unbound",
        {{"key_fingerprint", fingerprint}, {"models", Describe(grant.models)},
         {"bundles", Describe(grant.bundles)},
         {"why", "this key may serve any model or bundle: bind it in the allow-list "
                 "(models=... bundles=...)"}});
  }
  return std::unique_ptr<WorkerAuth>(new WorkerAuth(
      std::move(zap), ZapAllowList(kWorkerZapDomain, keys), std::move(by_fingerprint)));
}

void WorkerAuth::AnswerPending() {
  // ZAP requests are a handful of frames; the limits of RecvFrames are ample.
  RecvLimits limits;
  limits.max_frames = 16;
  limits.max_total_bytes = 4096;
  for (int i = 0; i < 100; ++i) {
    auto request = RecvFrames(zap_, 0, limits);
    std::vector<std::string> frames;
    if (request.ok()) {
      frames = std::move(*request);
    } else if (!absl::IsInvalidArgument(request.status())) {
      return;  // nothing waiting (or closed)
    }
    // An oversized request still needs a reply: a REP socket answers every request.
    ZapDecision decision;
    std::vector<std::string> reply = AnswerZapRequest(frames, allow_, &decision);
    (void)SendFrames(zap_, reply);
    Record(decision);
  }
}

void WorkerAuth::Record(const ZapDecision& decision) {
  if (decision.outcome == ZapDecision::Outcome::kAdmitted) {
    ++admitted_;
    Log(LogLevel::kInfo, "broker.worker_admitted",
        {{"key_fingerprint", decision.fingerprint}, {"address", decision.address}});
    return;
  }
  ++refused_;
  const int64_t now = SystemClock().MonotonicMicros() / 1000;
  if (last_logged_.size() > kMaxRememberedKeys) last_logged_.clear();
  auto& [last_ms, since] = last_logged_[decision.fingerprint];
  ++since;
  if (last_ms != 0 && now - last_ms < kRefusalLogIntervalMs) return;
  Log(LogLevel::kWarning, "broker.worker_refused",
      {{"key_fingerprint", decision.fingerprint.empty() ? "none" : decision.fingerprint},
       {"address", decision.address},
       {"why", decision.why},
       {"refusals", absl::StrCat(since)}});
  last_ms = now;
  since = 0;
}

}  // namespace gantry::broker
