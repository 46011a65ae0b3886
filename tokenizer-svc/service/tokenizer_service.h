// gantry-tokenizer: the tokenizers and chat templates of several served models behind
// one ZeroMQ ROUTER socket (proto/gantry/v1/tokenizer.proto).
//
// Handle() is the pure core (one request in, one response out; tested directly); Serve()
// runs the socket: frames [identity, "", body] from a REQ client or [identity, body] from
// a DEALER, the reply mirroring the envelope. A frame that is not a TokenizerRequest is
// answered with INVALID_ARGUMENT / protocol_error when it can be addressed, otherwise
// dropped and counted; the service never crashes on input. One request is at most
// 16 MiB; it may tokenize or count at most 262,144 ids and answer at most 16 MiB of text
// (invalid_request, or OUT_OF_RANGE for a text with more ids); at most 8 answers wait
// for a peer that does not read them, the rest are dropped. The service has no caller
// authentication: it answers anyone who can reach its endpoint (loopback by default),
// one request at a time.
//
// Thread-safety: Handle() is thread-safe (models are immutable); Serve() runs on one
// thread until Stop().
#ifndef GANTRY_TOKENIZER_SVC_SERVICE_TOKENIZER_SERVICE_H_
#define GANTRY_TOKENIZER_SVC_SERVICE_TOKENIZER_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/tokenizer.pb.h"
#include "tokenizer-svc/jinja/chat_template.h"
#include "tokenizer-svc/tokenizer/tokenizer.h"

namespace gantry::tokenizer_service {

struct ServedModel {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<jinja::ChatTemplate> chat_template;  // null: render/count refused
};

// Loads a model's tokenizer and template from `dir`: a bundle directory (bundle.json:
// the pinned tokenizer and chat_template.jinja, verified) or a tokenizer directory
// (tokenizer.json + tokenizer_config.json with chat_template).
absl::StatusOr<ServedModel> LoadServedModel(const std::string& dir);

class TokenizerService {
 public:
  explicit TokenizerService(std::map<std::string, ServedModel> models);

  v1::TokenizerResponse Handle(const v1::TokenizerRequest& request) const;

  // Binds `endpoint` (e.g. "tcp://127.0.0.1:*") and serves until Stop().
  // Errors: the bind failing.
  absl::Status Serve(const std::string& endpoint);
  // The endpoint actually bound, once Serve() has bound it ("" before).
  std::string endpoint() const;
  void Stop() { stop_.store(true); }
  uint64_t dropped_frames() const { return dropped_.load(); }

 private:
  std::map<std::string, ServedModel> models_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0};
  mutable std::mutex endpoint_mu_;
  std::string endpoint_;
};

}  // namespace gantry::tokenizer_service

#endif  // GANTRY_TOKENIZER_SVC_SERVICE_TOKENIZER_SERVICE_H_
