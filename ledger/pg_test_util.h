// Test-only: a fresh database on the Postgres that tests/run started
// (GANTRY_TEST_PG_URL), so that each test owns its ledger and may tamper with it.
#ifndef GANTRY_LEDGER_PG_TEST_UTIL_H_
#define GANTRY_LEDGER_PG_TEST_UTIL_H_

#include <cstdlib>
#include <string>

#include <pqxx/pqxx>

#include "common/ids.h"

namespace gantry::ledger {

// The server URL, or "" (the caller fails the test with a message naming tests/run).
inline std::string TestServerUrlForTest() {
  const char* url = std::getenv("GANTRY_TEST_PG_URL");
  return url ? url : "";
}

// Creates database "t_<random>" and returns its URL.
inline std::string CreateTestDatabaseForTest() {
  std::string server = TestServerUrlForTest();
  std::string name = NewId("t");
  {
    pqxx::connection admin(server);
    pqxx::nontransaction tx(admin);
    tx.exec0("CREATE DATABASE " + name);
  }
  return server.substr(0, server.rfind('/') + 1) + name;
}

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_PG_TEST_UTIL_H_
