// The decision half of a ZAP/1.0 handler (ZeroMQ RFC 27) for CURVE servers: given one
// request that libzmq sent to inproc://zeromq.zap.01, the reply that admits the peer
// only when its CURVE public key is in an allow-list (docs/protocol.md, "CURVE and ZAP").
// The socket half (a REP socket bound to that endpoint, polled by its owner) lives with
// the owner, here the router's broker.
//
// Request frames: "1.0", request id, domain, address, routing id, mechanism, then the
// mechanism's credentials (CURVE: one frame, the client's 32-byte public key).
// Reply frames: "1.0", the request id, status code ("200" admitted, "400" refused,
// "500" malformed request), status text, user id (the key's fingerprint when admitted),
// metadata (empty).
//
// The request comes from libzmq, but its credentials and address come from the remote
// peer: nothing in it is trusted, and every request gets a reply (a REP socket must
// answer before it can receive again).
//
// Thread-safety: ZapAllowList is immutable after construction; AnswerZapRequest is
// thread-safe.
#ifndef GANTRY_COMMON_ZAP_HANDLER_H_
#define GANTRY_COMMON_ZAP_HANDLER_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gantry {

inline constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";

class ZapAllowList {
 public:
  // `domain`: the ZAP domain the server socket sets (ZMQ_ZAP_DOMAIN); requests for any
  // other domain are refused. `keys_z85`: admitted public keys, each already validated
  // (ParseCurveAllowList); one that does not decode is skipped.
  ZapAllowList(std::string domain, const std::vector<std::string>& keys_z85);

  const std::string& domain() const { return domain_; }
  bool Contains(absl::string_view key_bytes) const {
    return keys_.count(std::string(key_bytes)) > 0;
  }
  size_t size() const { return keys_.size(); }

 private:
  std::string domain_;
  std::set<std::string> keys_;  // 32 bytes each
};

struct ZapDecision {
  enum class Outcome { kAdmitted, kRefused, kMalformed } outcome = Outcome::kMalformed;
  std::string fingerprint;  // of the client's key (CurveKeyFingerprint); "" if none
  std::string address;      // the peer's address as libzmq reports it ("10.0.0.2")
  std::string why;          // for logs: "unknown key", "mechanism NULL", ...
};

// The reply to `request`, and what was decided in `*decision`.
std::vector<std::string> AnswerZapRequest(const std::vector<std::string>& request,
                                          const ZapAllowList& allow, ZapDecision* decision);

}  // namespace gantry

#endif  // GANTRY_COMMON_ZAP_HANDLER_H_
