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

// The role events are written through: a login of its own with INSERT and SELECT only
// (never the owner, never a superuser; CheckWriterSession refuses those).
inline constexpr char kWriterRole[] = "gantry_ledger_writer";

// The schema version a writer needs (the last migration's).
inline constexpr int kSchemaVersion = 4;

// Run by a writer on each new connection: the schema must be at kSchemaVersion (the
// writer never migrates; `gantry ledger setup` does, as the owner), and the session
// user must be unable to change what it wrote: not a superuser, no CREATEROLE, not the
// owner of ledger_events nor a member of the owner's role, no UPDATE, DELETE, TRUNCATE
// or TRIGGER privilege on it. Errors: FAILED_PRECONDITION ledger_schema_outdated /
// ledger_writer_privileged; UNAVAILABLE when the connection fails.
absl::Status CheckWriterSession(pqxx::connection& connection);

// `gantry ledger setup` as the owner: ApplyMigrations, then, when `writer_password` is
// not empty, sets it as the writer role's password (SCRAM, as the server hashes it).
absl::Status SetupLedger(pqxx::connection& owner, const std::string& writer_password);

// Applies every migration not yet recorded in ledger_schema_migrations.
// Errors: UNAVAILABLE when Postgres cannot be reached; INTERNAL when a migration fails
// (the transaction is rolled back and the message names the version).
absl::Status ApplyMigrations(pqxx::connection& connection);

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_SCHEMA_H_
