#include "ledger/schema.h"

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"

namespace gantry::ledger {
namespace {

// Key of the advisory lock that serialises concurrent migrators ("gantryld").
constexpr long long kMigrationLock = 0x67616e7472796c64LL;

constexpr char kV1Events[] = R"sql(
CREATE TABLE ledger_events (
  id           bigserial PRIMARY KEY,          -- global insertion order (tail, export)
  event_id     text   NOT NULL UNIQUE,         -- writer-issued; replays are idempotent
  stream_id    text   NOT NULL,
  seq          bigint NOT NULL CHECK (seq >= 0),
  ts_unix_us   bigint NOT NULL,
  type         text   NOT NULL,
  actor        text   NOT NULL,
  payload_json text   NOT NULL,                -- exactly the bytes that were hashed
  prev_sha256  text   NOT NULL,
  sha256       text   NOT NULL,
  inserted_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (stream_id, seq)                      -- a stream never forks
);
CREATE INDEX ledger_events_type ON ledger_events (type);

-- Append-only, enforced twice: the writer role lacks the privileges, and these
-- triggers refuse UPDATE, DELETE and TRUNCATE for everyone, owners included.
CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_events is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER ledger_events_no_update_delete BEFORE UPDATE OR DELETE ON ledger_events
  FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_events_no_truncate BEFORE TRUNCATE ON ledger_events
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
)sql";

constexpr char kV2Identities[] = R"sql(
CREATE TABLE ledger_bundle_identities (
  identity_sha256      text PRIMARY KEY,
  model                text NOT NULL,
  architecture         text NOT NULL,
  weights_sha256       text NOT NULL,
  tokenizer_sha256     text NOT NULL,
  chat_template_sha256 text NOT NULL,
  tool_protocol        text NOT NULL,
  context_length       integer NOT NULL,
  first_seen           timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ledger_policy_versions (
  policy_sha256 text PRIMARY KEY,
  source_path   text NOT NULL,
  loaded_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ledger_tasks (
  task_id        text PRIMARY KEY,
  parent_task_id text REFERENCES ledger_tasks (task_id),
  principal      text NOT NULL,
  goal           text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ledger_sessions (
  session_id     text PRIMARY KEY,
  principal      text NOT NULL,
  client_name    text NOT NULL,   -- gen_ai.client name as the client announced it
  client_version text NOT NULL,
  started_at     timestamptz NOT NULL DEFAULT now()
);
)sql";

constexpr char kV3WriterRole[] = R"sql(
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'gantry_ledger_writer') THEN
    CREATE ROLE gantry_ledger_writer NOLOGIN;
  END IF;
END $$;
REVOKE ALL ON ledger_events, ledger_bundle_identities, ledger_policy_versions,
              ledger_tasks, ledger_sessions FROM gantry_ledger_writer;
GRANT SELECT, INSERT ON ledger_events, ledger_bundle_identities, ledger_policy_versions,
                        ledger_tasks, ledger_sessions TO gantry_ledger_writer;
GRANT USAGE ON SEQUENCE ledger_events_id_seq TO gantry_ledger_writer;
)sql";

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "events, append-only", kV1Events},
      {2, "identities, policy versions, tasks, sessions", kV2Identities},
      {3, "insert-only writer role", kV3WriterRole},
  };
  return kMigrations;
}

absl::Status ApplyMigrations(pqxx::connection& connection) {
  try {
    for (const Migration& migration : Migrations()) {
      pqxx::work tx(connection);
      tx.exec(absl::StrCat("SELECT pg_advisory_xact_lock(", kMigrationLock, ")"));
      tx.exec0(
          "CREATE TABLE IF NOT EXISTS ledger_schema_migrations ("
          " version integer PRIMARY KEY, name text NOT NULL,"
          " applied_at timestamptz NOT NULL DEFAULT now())");
      pqxx::result done = tx.exec_params(
          "SELECT 1 FROM ledger_schema_migrations WHERE version = $1", migration.version);
      if (!done.empty()) {
        tx.commit();
        continue;
      }
      try {
        tx.exec0(migration.sql);
      } catch (const pqxx::sql_error& e) {
        return absl::InternalError(absl::StrCat("ledger migration ", migration.version, " (",
                                                migration.name, ") failed: ", e.what()));
      }
      tx.exec_params0("INSERT INTO ledger_schema_migrations (version, name) VALUES ($1, $2)",
                      migration.version, migration.name);
      tx.commit();
    }
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(absl::StrCat("ledger database unreachable: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ledger migrations: ", e.what()));
  }
}

}  // namespace gantry::ledger
