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

void AppendJsonString(absl::string_view text, std::string* out, bool ensure_ascii) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    // A run of bytes that are written as they are, at once.
    size_t run = i;
    while (run < text.size()) {
      unsigned char b = text[run];
      if (b < 0x20 || b == '"' || b == '\\' || b >= 0x80) break;
      ++run;
    }
    if (run > i) {
      out->append(text.data() + i, run - i);
      i = run;
      if (i == text.size()) break;
    }
    unsigned char c = text[i];
    if (c >= 0x80) {
      uint32_t cp = 0;
      size_t n = Utf8SequenceLength(text, i, &cp);
      if (n == 0) {  // not UTF-8: keep the output valid
        out->append(ensure_ascii ? "\\ufffd" : "\xEF\xBF\xBD");
        ++i;
        continue;
      }
      if (!ensure_ascii) {
        out->append(text.data() + i, n);
      } else if (cp < 0x10000) {
        out->append(absl::StrFormat("\\u%04x", cp));
      } else {
        uint32_t v = cp - 0x10000;
        out->append(absl::StrFormat("\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)));
      }
      i += n;
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (c < 0x20) {
          out->append(absl::StrFormat("\\u%04x", c));
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

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
