#include "ledger/event_hash.h"

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace gantry::ledger {
namespace {

void AppendField(absl::string_view bytes, std::string* out) {
  absl::StrAppend(out, bytes.size(), ":", bytes, "\n");
}

}  // namespace

std::string CanonicalEncoding(const v1::LedgerEvent& event) {
  std::string out = "gantry.ledger.v1\n";
  AppendField(event.event_id(), &out);
  AppendField(event.stream_id(), &out);
  AppendField(absl::StrCat(event.seq()), &out);
  AppendField(absl::StrCat(event.ts_unix_us()), &out);
  AppendField(event.type(), &out);
  AppendField(event.actor(), &out);
  AppendField(event.payload_json(), &out);
  AppendField(event.prev_sha256(), &out);
  return out;
}

std::string EventHash(const v1::LedgerEvent& event) {
  return Sha256Hex(CanonicalEncoding(event));
}

}  // namespace gantry::ledger
