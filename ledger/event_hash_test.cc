#include "ledger/event_hash.h"

#include <gtest/gtest.h>

#include "common/sha256.h"

namespace gantry::ledger {
namespace {

v1::LedgerEvent Sample() {
  v1::LedgerEvent e;
  e.set_event_id("evt_1");
  e.set_stream_id("req_a");
  e.set_seq(2);
  e.set_ts_unix_us(1700000000000000);
  e.set_type("admission.decided");
  e.set_actor("router");
  e.set_payload_json("{\"gen_ai.request.model\":\"qwen3\"}");
  e.set_prev_sha256("ab");
  return e;
}

TEST(EventHashTest, CanonicalEncodingIsLengthPrefixed) {
  EXPECT_EQ(CanonicalEncoding(Sample()),
            "gantry.ledger.v1\n5:evt_1\n5:req_a\n1:2\n16:1700000000000000\n"
            "17:admission.decided\n6:router\n32:{\"gen_ai.request.model\":\"qwen3\"}\n2:ab\n");
  EXPECT_EQ(EventHash(Sample()), Sha256Hex(CanonicalEncoding(Sample())));
}

TEST(EventHashTest, EveryFieldChangesTheHash) {
  const std::string base = EventHash(Sample());
  auto changed = [&](auto mutate) {
    v1::LedgerEvent e = Sample();
    mutate(&e);
    return EventHash(e);
  };
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_event_id("evt_2"); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_stream_id("req_b"); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_seq(3); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_ts_unix_us(1); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_type("x"); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_actor("x"); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_payload_json("{}"); }));
  EXPECT_NE(base, changed([](v1::LedgerEvent* e) { e->set_prev_sha256("ac"); }));
  // The stored hash itself is not part of the encoding.
  EXPECT_EQ(base, changed([](v1::LedgerEvent* e) { e->set_sha256("zz"); }));
  // Moving bytes between adjacent fields is not a collision.
  EXPECT_NE(changed([](v1::LedgerEvent* e) { e->set_type("ab"); e->set_actor("c"); }),
            changed([](v1::LedgerEvent* e) { e->set_type("a"); e->set_actor("bc"); }));
}

}  // namespace
}  // namespace gantry::ledger
