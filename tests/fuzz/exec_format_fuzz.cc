// Fuzz target: what the sandbox reads of files to run them. The exec supervisor's
// reading of a file's first bytes (ELF program headers and PT_INTERP, "#!" lines),
// which come from files the sandbox can write; and the program view's reading of an
// ELF object's dynamic section (DT_NEEDED, DT_RUNPATH) and of /etc/ld.so.cache.
// Invariant: never crashes or reads out of bounds; a result without a problem has the
// fields its kind needs; no name read holds a NUL.
#include <cstdlib>
#include <string>

#include "sandbox-svc/exec_format.h"

namespace {

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  gantry::sandbox::ExecFormat f = gantry::sandbox::ReadExecFormat(bytes);
  if (f.problem.empty()) {
    if (f.kind == gantry::sandbox::ExecFormat::kUnknown) abort();
    if (f.kind == gantry::sandbox::ExecFormat::kScript && f.interpreter.empty()) abort();
  }
  if (HasNul(f.interpreter)) abort();

  auto read = [&bytes](uint64_t offset, size_t n, std::string* out) {
    if (offset > bytes.size() || bytes.size() - offset < n) return false;
    *out = bytes.substr(offset, n);
    return true;
  };
  gantry::sandbox::ElfDependencies d = gantry::sandbox::ReadElfDependencies(read);
  if (!d.is_elf && !d.needed.empty()) abort();
  for (const std::string& name : d.needed) {
    if (HasNul(name)) abort();
  }
  for (const std::string& dir : d.search) {
    if (dir.empty() || HasNul(dir)) abort();
  }
  for (const auto& [name, path] : gantry::sandbox::ReadLoaderCache(bytes)) {
    if (HasNul(name) || HasNul(path)) abort();
  }
  return 0;
}
