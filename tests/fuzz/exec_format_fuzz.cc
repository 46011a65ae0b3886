// Fuzz target: the exec supervisor's reading of a file's first bytes (ELF program
// headers and PT_INTERP, "#!" lines), which come from files the sandbox can write.
// Invariant: never crashes or reads out of bounds; a result without a problem has the
// fields its kind needs.
#include <cstdlib>
#include <string>

#include "sandbox-svc/exec_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string head(reinterpret_cast<const char*>(data), size);
  gantry::sandbox::ExecFormat f = gantry::sandbox::ReadExecFormat(head);
  if (f.problem.empty()) {
    if (f.kind == gantry::sandbox::ExecFormat::kUnknown) abort();
    if (f.kind == gantry::sandbox::ExecFormat::kScript && f.interpreter.empty()) abort();
  }
  if (f.interpreter.find('\0') != std::string::npos) abort();
  return 0;
}
