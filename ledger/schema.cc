#include "ledger/schema.h"

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "common/status.h"

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

// The keyed chain (docs/ledger.md, "Keyed chain"), and the writer role made a login
// of its own: the writer connects as it, never as the owner. Rows from before this
// version have NULL writer columns; verify reports them as unkeyed.
constexpr char kV4KeyedChain[] = R"sql(
ALTER TABLE ledger_events ADD COLUMN writer_id text, ADD COLUMN writer_seq bigint,
                          ADD COLUMN prev_mac text, ADD COLUMN mac text;
ALTER TABLE ledger_events ADD CONSTRAINT ledger_events_writer_chain
  UNIQUE (writer_id, writer_seq);
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'gantry_ledger_writer') THEN
    CREATE ROLE gantry_ledger_writer;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;  -- another database's migration created it at the same moment
END $$;
ALTER ROLE gantry_ledger_writer LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
  NOBYPASSRLS;
GRANT SELECT ON ledger_schema_migrations TO gantry_ledger_writer;
-- The routers' shared budget counters (router/budget/budget_sync.cc) are not evidence:
-- the writer's login keeps them up to date.
CREATE TABLE IF NOT EXISTS gantry_budget_usage (
  router_id text NOT NULL, principal text NOT NULL,
  day bigint NOT NULL, month bigint NOT NULL,
  day_tokens bigint NOT NULL, month_tokens bigint NOT NULL,
  in_flight bigint NOT NULL, minute_admissions bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (router_id, principal));
GRANT SELECT, INSERT, UPDATE, DELETE ON gantry_budget_usage TO gantry_ledger_writer;
)sql";

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "events, append-only", kV1Events},
      {2, "identities, policy versions, tasks, sessions", kV2Identities},
      {3, "insert-only writer role", kV3WriterRole},
      {4, "keyed chain; the writer role logs in itself", kV4KeyedChain},
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

namespace gantry::ledger {

absl::Status CheckWriterSession(pqxx::connection& connection) {
  try {
    pqxx::read_transaction tx(connection);
    pqxx::result version;
    try {
      version = tx.exec("SELECT coalesce(max(version), 0) FROM ledger_schema_migrations");
    } catch (const pqxx::sql_error&) {
      return Error(absl::StatusCode::kFailedPrecondition, "ledger_schema_outdated",
                   "the ledger schema is missing or unreadable: run `gantry ledger setup` "
                   "as the owner");
    }
    if (version[0][0].as<int>() < kSchemaVersion) {
      return Error(absl::StatusCode::kFailedPrecondition, "ledger_schema_outdated",
                   absl::StrCat("the ledger schema is at version ", version[0][0].as<int>(),
                                ", the writer needs ", kSchemaVersion,
                                ": run `gantry ledger setup` as the owner"));
    }
    pqxx::row r = tx.exec1(
        "SELECT session_user::text, r.rolsuper, r.rolcreaterole, "
        "       pg_has_role(session_user, c.relowner, 'MEMBER'), "
        "       has_table_privilege(session_user, 'ledger_events', "
        "                           'UPDATE, DELETE, TRUNCATE, TRIGGER'), "
        "       current_user = session_user "
        "FROM pg_roles r, pg_class c "
        "WHERE r.rolname = session_user AND c.oid = 'ledger_events'::regclass");
    const std::string user = r[0].as<std::string>();
    std::string why;
    if (r[1].as<bool>()) {
      why = "is a superuser";
    } else if (r[2].as<bool>()) {
      why = "may create roles";
    } else if (r[3].as<bool>()) {
      why = "owns ledger_events (or is a member of its owner)";
    } else if (r[4].as<bool>()) {
      why = "may update, delete, truncate or add triggers to ledger_events";
    } else if (!r[5].as<bool>()) {
      why = "runs under another role (SET ROLE)";
    }
    if (!why.empty()) {
      return Error(absl::StatusCode::kFailedPrecondition, "ledger_writer_privileged",
                   absl::StrCat("the ledger writer's login '", user, "' ", why,
                                ": connect as ", kWriterRole, " (docs/ledger.md, \"Roles\")"));
    }
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(absl::StrCat("ledger database unreachable: ", e.what()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("ledger writer check: ", e.what()));
  }
}

absl::Status SetupLedger(pqxx::connection& owner, const std::string& writer_password) {
  GANTRY_RETURN_IF_ERROR(ApplyMigrations(owner));
  if (writer_password.empty()) return absl::OkStatus();
  try {
    pqxx::nontransaction tx(owner);
    tx.exec0(absl::StrCat("ALTER ROLE ", kWriterRole, " PASSWORD ", tx.quote(writer_password)));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ledger setup: writer password: ", e.what()));
  }
}

}  // namespace gantry::ledger
