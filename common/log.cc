#include "common/log.h"

#include <cstdio>
#include <ctime>
#include <mutex>

#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/utf8.h"

namespace gantry {
namespace {

std::mutex g_mu;
std::string g_component = "gantry";
LogLevel g_min_level = LogLevel::kInfo;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

std::string FormatLine(const std::string& component, LogLevel level,
                       absl::string_view event, std::initializer_list<LogField> fields,
                       int64_t unix_micros) {
  time_t secs = static_cast<time_t>(unix_micros / 1'000'000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  std::string line = absl::StrFormat(
      "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%06dZ\",\"level\":\"%s\",\"component\":",
      tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
      static_cast<int>(unix_micros % 1'000'000), LevelName(level));
  AppendJsonString(component, &line);
  line += ",\"event\":";
  AppendJsonString(event, &line);
  for (const auto& field : fields) {
    line += ',';
    AppendJsonString(field.first, &line);
    line += ':';
    AppendJsonString(field.second, &line);
  }
  line += '}';
  return line;
}

}  // namespace

void InitLogging(absl::string_view component, LogLevel min_level) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_component = std::string(component);
  g_min_level = min_level;
}

void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (level < g_min_level) return;
  std::string line =
      FormatLine(g_component, level, event, fields, SystemClock().UnixMicros());
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string FormatLogLineForTest(LogLevel level, absl::string_view event,
                                 std::initializer_list<LogField> fields,
                                 int64_t unix_micros) {
  return FormatLine("test", level, event, fields, unix_micros);
}

}  // namespace gantry
