// What the kernel does with a file it is asked to exec, read from the file's first
// bytes: an ELF program (and the dynamic loader its PT_INTERP names, which the kernel
// runs first), a "#!" script (and its interpreter and optional argument, which the
// kernel runs instead), or neither (the kernel would try binfmt_misc handlers, or fail
// with ENOEXEC). The exec supervisor decides the interpreter and the loader too, so
// that a granted script or ELF cannot make the kernel start an ungranted program.
//
// The bytes come from files the sandbox can write: outside bytes, parsed with bounds
// checks only (tests/fuzz/exec_format_fuzz.cc).
//
// Thread-safety: pure functions.
#ifndef GANTRY_SANDBOX_SVC_EXEC_FORMAT_H_
#define GANTRY_SANDBOX_SVC_EXEC_FORMAT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace gantry::sandbox {

// How much of a file ReadExecFormat needs at most (the kernel reads 256 bytes of a
// script's first line; program headers of an ELF are read up to this many bytes).
inline constexpr size_t kExecHeadBytes = 4096;

struct ExecFormat {
  enum Kind { kUnknown, kElf, kScript };
  Kind kind = kUnknown;
  // kElf: the PT_INTERP path ("" for a static program). kScript: the interpreter path.
  std::string interpreter;
  // kScript: the optional single argument after the interpreter ("" when none).
  std::string interpreter_arg;
  // Why a file is kUnknown, or an ELF whose headers cannot be read ("" when fine).
  std::string problem;
};

// Reads `head`, the first bytes of a file (at most kExecHeadBytes, fewer when the file
// is shorter).
ExecFormat ReadExecFormat(absl::string_view head);

// What the dynamic loader reads of an ELF object to load what it needs (for the
// sandbox's program view, program_view.h): the DT_NEEDED names and the search path
// (DT_RUNPATH, else DT_RPATH, split at ':', "$ORIGIN" left as written).
struct ElfDependencies {
  std::vector<std::string> needed;
  std::vector<std::string> search;
  std::string interpreter;  // PT_INTERP ("" when none)
  bool is_elf = false;      // a 64-bit little-endian ELF whose headers could be read
  std::string problem;      // why not, or why its dynamic section could not be read
};

// `read(offset, n, out)` reads n bytes of the file at offset into *out; false when the
// file is shorter. Sizes are bounded (program headers, the dynamic section and the
// string table: at most 1 MiB each).
using ReadAtFn = absl::FunctionRef<bool(uint64_t offset, size_t n, std::string* out)>;
ElfDependencies ReadElfDependencies(ReadAtFn read);

// glibc's /etc/ld.so.cache ("glibc-ld.so.cache1.1"): each x86-64 library name with the
// path the loader takes it from, in the file's order (a name may repeat). Anything
// malformed ends the list where it starts.
std::vector<std::pair<std::string, std::string>> ReadLoaderCache(absl::string_view bytes);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_EXEC_FORMAT_H_
