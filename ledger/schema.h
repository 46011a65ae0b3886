// The ledger's Postgres schema, as an ordered list of versioned migrations that every
// service applies at start (docs/ledger.md, "Schema").
//
// Thread-safety: ApplyMigrations may run in several processes at once; a transaction-
// scoped advisory lock serialises them, and each migration runs in its own transaction.
#ifndef GANTRY_LEDGER_SCHEMA_H_
#define GANTRY_LEDGER_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

#include <pqxx/connection>

namespace gantry::ledger {

struct Migration {
  int version;
  const char* name;
  const char* sql;
};

// All migrations, in version order.
const std::vector<Migration>& Migrations();

// The role events are written through: INSERT and SELECT only.
inline constexpr char kWriterRole[] = "gantry_ledger_writer";

// Applies every migration not yet recorded in ledger_schema_migrations.
// Errors: UNAVAILABLE when Postgres cannot be reached; INTERNAL when a migration fails
// (the transaction is rolled back and the message names the version).
absl::Status ApplyMigrations(pqxx::connection& connection);

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_SCHEMA_H_
