#include "sandbox-svc/exec_format.h"

#include <elf.h>

#include <cstring>

namespace gantry::sandbox {
namespace {

template <typename T>
bool ReadAt(absl::string_view bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

ExecFormat Problem(ExecFormat::Kind kind, const char* why) {
  ExecFormat f;
  f.kind = kind;
  f.problem = why;
  return f;
}

// The kernel's binfmt_script: "#!", optional blanks, the interpreter up to a blank or
// the end of the line, then everything up to the end of the line (trimmed) as one
// argument. The line is cut at 256 bytes in Linux 5.x and later only when the
// interpreter itself was complete; a cut interpreter name is an error (ENOEXEC).
ExecFormat Script(absl::string_view head) {
  constexpr size_t kLine = 256;
  absl::string_view line = head.substr(2);
  size_t nl = line.find('\n');
  const bool ended = nl != absl::string_view::npos && nl + 2 < kLine;
  if (nl != absl::string_view::npos) line = line.substr(0, nl);
  if (line.size() > kLine - 2) line = line.substr(0, kLine - 2);
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  size_t i = 0;
  while (i < line.size() && blank(line[i])) ++i;
  size_t start = i;
  while (i < line.size() && !blank(line[i]) && line[i] != '\0') ++i;
  if (i == start) return Problem(ExecFormat::kScript, "a #! line without an interpreter");
  if (i == line.size() && !ended && head.size() >= kLine) {
    return Problem(ExecFormat::kScript, "a #! interpreter longer than the kernel reads");
  }
  ExecFormat f;
  f.kind = ExecFormat::kScript;
  f.interpreter = std::string(line.substr(start, i - start));
  while (i < line.size() && blank(line[i])) ++i;
  absl::string_view arg = line.substr(i);
  size_t nul = arg.find('\0');
  if (nul != absl::string_view::npos) arg = arg.substr(0, nul);
  while (!arg.empty() && blank(arg.back())) arg.remove_suffix(1);
  f.interpreter_arg = std::string(arg);
  return f;
}

ExecFormat Elf(absl::string_view head) {
  if (head.size() < EI_NIDENT || static_cast<unsigned char>(head[EI_CLASS]) != ELFCLASS64 ||
      static_cast<unsigned char>(head[EI_DATA]) != ELFDATA2LSB) {
    return Problem(ExecFormat::kElf, "not a 64-bit little-endian ELF");
  }
  Elf64_Ehdr eh;
  if (!ReadAt(head, 0, &eh)) return Problem(ExecFormat::kElf, "a short ELF header");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 128) {
    return Problem(ExecFormat::kElf, "unusual ELF program headers");
  }
  ExecFormat f;
  f.kind = ExecFormat::kElf;
  int interps = 0;
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!ReadAt(head, eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), &ph)) {
      return Problem(ExecFormat::kElf, "program headers beyond the first 4 KiB");
    }
    if (ph.p_type != PT_INTERP) continue;
    if (++interps > 1) return Problem(ExecFormat::kElf, "more than one PT_INTERP");
    if (ph.p_filesz < 2 || ph.p_filesz > 4096 || ph.p_offset > head.size() ||
        head.size() - ph.p_offset < ph.p_filesz) {
      return Problem(ExecFormat::kElf, "a PT_INTERP beyond the first 4 KiB");
    }
    absl::string_view path = head.substr(ph.p_offset, ph.p_filesz);
    // The kernel requires the terminating NUL at the end and no NUL before it.
    if (path.back() != '\0' || path.substr(0, path.size() - 1).find('\0') != absl::string_view::npos) {
      return Problem(ExecFormat::kElf, "a malformed PT_INTERP");
    }
    f.interpreter = std::string(path.substr(0, path.size() - 1));
  }
  return f;
}

}  // namespace

ExecFormat ReadExecFormat(absl::string_view head) {
  if (head.size() > kExecHeadBytes) head = head.substr(0, kExecHeadBytes);
  if (head.size() >= 4 && memcmp(head.data(), ELFMAG, SELFMAG) == 0) return Elf(head);
  if (head.size() >= 2 && head[0] == '#' && head[1] == '!') return Script(head);
  return Problem(ExecFormat::kUnknown, "neither an ELF program nor a #! script");
}

}  // namespace gantry::sandbox
