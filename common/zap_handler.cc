#include "common/zap_handler.h"

#include "absl/strings/str_cat.h"
#include "common/curve_keys.h"

namespace gantry {
namespace {

constexpr char kZapVersion[] = "1.0";
// The address libzmq reports is short ("10.1.2.3", "::1"); bound what we keep of it.
constexpr size_t kMaxAddressChars = 64;

std::vector<std::string> Reply(const std::string& request_id, const char* code,
                               const std::string& text, const std::string& user_id) {
  return {kZapVersion, request_id, code, text, user_id, ""};
}

// Printable ASCII only, bounded: the address goes into logs.
std::string SafeAddress(absl::string_view address) {
  std::string out;
  for (char c : address.substr(0, kMaxAddressChars)) {
    out.push_back(c >= 0x21 && c <= 0x7e ? c : '?');
  }
  return out;
}

}  // namespace

ZapAllowList::ZapAllowList(std::string domain, const std::vector<std::string>& keys_z85)
    : domain_(std::move(domain)) {
  for (const auto& z85 : keys_z85) {
    auto bytes = DecodeCurveKeyZ85(z85);
    if (bytes.ok()) keys_.insert(*bytes);
  }
}

std::vector<std::string> AnswerZapRequest(const std::vector<std::string>& request,
                                          const ZapAllowList& allow, ZapDecision* decision) {
  using Outcome = ZapDecision::Outcome;
  *decision = ZapDecision();
  const std::string request_id = request.size() > 1 ? request[1] : "";
  if (request.size() < 6 || request[0] != kZapVersion) {
    decision->outcome = Outcome::kMalformed;
    decision->why = absl::StrCat("malformed ZAP request (", request.size(), " frames)");
    return Reply(request_id, "500", "malformed ZAP request", "");
  }
  const std::string& domain = request[2];
  const std::string& mechanism = request[5];
  decision->address = SafeAddress(request[3]);
  decision->outcome = Outcome::kRefused;
  if (mechanism != "CURVE") {
    decision->why = absl::StrCat("mechanism ", SafeAddress(mechanism));
    return Reply(request_id, "400", "CURVE required", "");
  }
  if (request.size() != 7 || request[6].size() != kCurveKeyBytes) {
    decision->outcome = Outcome::kMalformed;
    decision->why = "CURVE credentials are not one 32-byte key";
    return Reply(request_id, "500", "malformed CURVE credentials", "");
  }
  decision->fingerprint = CurveKeyFingerprint(request[6]);
  if (domain != allow.domain()) {
    decision->why = absl::StrCat("domain ", SafeAddress(domain));
    return Reply(request_id, "400", "unknown domain", "");
  }
  if (!allow.Contains(request[6])) {
    decision->why = "key not in the allow-list";
    return Reply(request_id, "400", "unknown key", "");
  }
  decision->outcome = Outcome::kAdmitted;
  decision->why = "key in the allow-list";
  return Reply(request_id, "200", "OK", decision->fingerprint);
}

}  // namespace gantry
