// Structured logging: one JSON object per line on stderr.
//
//   {"ts":"2026-11-30T11:18:34.123456Z","level":"info","component":"router",
//    "event":"worker.ready","worker_id":"...","model":"..."}
//
// `event` is a stable dotted name (grep-able, like ledger event types); fields carry
// the variable parts. State machines log their state names. Messages are never
// interpolated into `event`.
//
// Thread-safety: thread-safe; lines from different threads never interleave.
#ifndef GANTRY_COMMON_LOG_H_
#define GANTRY_COMMON_LOG_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "common/utf8.h"

namespace gantry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using LogField = std::pair<absl::string_view, std::string>;

// Sets the "component" of every later line (the service name) and the minimum level.
// Call once from main. Defaults: component "gantry", level kInfo.
void InitLogging(absl::string_view component, LogLevel min_level = LogLevel::kInfo);

void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields = {});

// Test-only: the line Log() would write, without the trailing newline, at a fixed time.
std::string FormatLogLineForTest(LogLevel level, absl::string_view event,
                                 std::initializer_list<LogField> fields,
                                 int64_t unix_micros);

// AppendJsonString, which log lines are made with, is in common/utf8.h.

}  // namespace gantry

#endif  // GANTRY_COMMON_LOG_H_
