#include "cli/builtin_commands.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/error_codes.h"
#include "common/log.h"
#include "common/status.h"
#include "proto/worker_frames.h"

namespace gantry::cli {
namespace {

constexpr char kGantryVersion[] = "0.1.0";

int RunVersion(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "gantry version: takes no arguments\n");
    return 2;
  }
  std::printf("gantry %s\nwire package gantry.v1, worker protocol %s (version %u)\n",
              kGantryVersion, std::string(wire::kWorkerProtocolSignature).c_str(),
              wire::kWorkerProtocolVersion);
  return 0;
}

int RunErrors(const std::vector<std::string>& args) {
  bool json = false;
  for (const auto& arg : args) {
    if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "gantry errors: unknown option '%s'\n", arg.c_str());
      return 2;
    }
  }
  size_t n = 0;
  const ErrorReason* table = ErrorReasons(&n);
  if (json) std::printf("[");
  for (size_t i = 0; i < n; ++i) {
    const ErrorReason& e = table[i];
    if (json) {
      std::string line = absl::StrCat(i ? ",\n " : "", "{\"reason\":\"", e.reason,
                                      "\",\"code\":\"", CodeName(e.code), "\",\"http\":",
                                      e.http_status, ",\"retryable\":",
                                      e.retryable ? "true" : "false", ",\"meaning\":");
      AppendJsonString(e.meaning, &line);
      std::printf("%s}", line.c_str());
    } else {
      std::printf("%-26s %-20s %d%s  %s\n", e.reason, CodeName(e.code).c_str(), e.http_status,
                  e.retryable ? " retry" : "      ", e.meaning);
    }
  }
  if (json) std::printf("]\n");
  return 0;
}

}  // namespace

const Subcommand kVersionCommand = {
    "version", "print the version of gantry and of its wire protocols",
    "Usage: gantry version\n\nPrints gantry's version, the wire package and the worker "
    "protocol version.\n",
    &RunVersion};

const Subcommand kErrorsCommand = {
    "errors", "list the stable error reasons with their codes and HTTP statuses",
    "Usage: gantry errors [--json]\n\nLists every error reason Gantry can return: its "
    "canonical code, HTTP status, whether a retry may succeed, and its meaning.\n"
    "  --json   one JSON array instead of a table\n",
    &RunErrors};

}  // namespace gantry::cli
