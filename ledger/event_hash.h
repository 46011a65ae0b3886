// The hash chain of ledger events (docs/ledger.md, "Hashing").
//
// An event's sha256 is SHA-256 over its canonical encoding: the ASCII line
// "gantry.ledger.v1\n" followed by eight netstring-like fields, each
// "<decimal byte length>:<bytes>\n", in this order:
//   event_id, stream_id, seq (decimal), ts_unix_us (decimal), type, actor, payload_json,
//   prev_sha256
// The length prefix makes the encoding unambiguous for any bytes in any field.
// prev_sha256 is "" for seq 0 and the previous event's sha256 otherwise.
//
// Thread-safety: pure functions.
#ifndef GANTRY_LEDGER_EVENT_HASH_H_
#define GANTRY_LEDGER_EVENT_HASH_H_

#include <string>

#include "gantry/v1/ledger.pb.h"

namespace gantry::ledger {

// The canonical bytes hashed for `event` (its sha256 field is ignored).
std::string CanonicalEncoding(const v1::LedgerEvent& event);

// Lowercase hex SHA-256 of CanonicalEncoding(event).
std::string EventHash(const v1::LedgerEvent& event);

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_EVENT_HASH_H_
