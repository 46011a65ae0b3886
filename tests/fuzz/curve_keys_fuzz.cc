// Fuzz target: CURVE key files, worker allow-lists and ZAP requests (common/curve_keys.h,
// common/zap_handler.h, router/broker/worker_auth.h). The same bytes are read four ways:
// as a key file, as a plain allow-list, as the broker's worker allow-list with grants,
// and (split into frames, tests/fuzz/fuzz_input.h) as a ZAP request.
// Invariants: nothing crashes; every key accepted decodes and re-encodes to itself; an
// allow-list is sorted and free of duplicates; every worker grant names models and
// bundles (never an empty set, which would permit nothing silently) and permits only
// what it names; every ZAP request gets a six-frame ZAP/1.0 reply, and "200" only for a
// key in the allow-list.
#include <algorithm>
#include <cstdlib>

#include "common/curve_keys.h"
#include "common/zap_handler.h"
#include "router/broker/worker_auth.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

void CheckKey(const std::string& z85) {
  auto bytes = gantry::DecodeCurveKeyZ85(z85);
  if (!bytes.ok() || bytes->size() != gantry::kCurveKeyBytes) std::abort();
  if (gantry::EncodeCurveKeyZ85(*bytes) != z85) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gantry;
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto key = ParseCurveKeyText(text); key.ok()) CheckKey(*key);
  if (auto keys = ParseCurveAllowList(text); keys.ok()) {
    if (keys->empty() || !std::is_sorted(keys->begin(), keys->end()) ||
        std::adjacent_find(keys->begin(), keys->end()) != keys->end()) {
      std::abort();
    }
    for (const auto& key : *keys) CheckKey(key);
  }
  if (auto grants = broker::ParseWorkerAllowList(text); grants.ok()) {
    for (size_t i = 0; i < grants->size(); ++i) {
      const broker::WorkerGrant& g = (*grants)[i];
      CheckKey(g.key_z85);
      if (i > 0 && !((*grants)[i - 1].key_z85 < g.key_z85)) std::abort();
      if (g.models.empty() || g.bundles.empty()) std::abort();
      const bool any_model = g.models.count(broker::kAnyWorkerGrant) > 0;
      const bool any_bundle = g.bundles.count(broker::kAnyWorkerGrant) > 0;
      const std::string model = any_model ? "some-model" : *g.models.begin();
      const std::string bundle = any_bundle ? std::string(64, 'b') : *g.bundles.begin();
      if (!broker::GrantPermits(g, model, bundle)) std::abort();
      if (!any_model && g.models.count("unlisted model name") == 0 &&
          broker::GrantPermits(g, "unlisted model name", bundle)) {
        std::abort();
      }
    }
  }
  // One fixed listed key: 32 bytes of 'k'.
  static const ZapAllowList allow("gantry-workers", {EncodeCurveKeyZ85(std::string(32, 'k'))});
  ZapDecision decision;
  auto frames = fuzz::SplitFrames(data, size);
  auto reply = AnswerZapRequest(frames, allow, &decision);
  if (reply.size() != 6 || reply[0] != "1.0") std::abort();
  if (reply[2] == "200" &&
      (frames.size() != 7 || !allow.Contains(frames[6]) || frames[5] != "CURVE")) {
    std::abort();
  }
  return 0;
}
