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

namespace {

constexpr size_t kMaxDynamicBytes = 1u << 20;

// The NUL-terminated string at `offset` of `table`, or false.
bool StringAt(absl::string_view table, uint64_t offset, std::string* out) {
  if (offset >= table.size()) return false;
  size_t end = table.find('\0', offset);
  if (end == absl::string_view::npos) return false;
  *out = std::string(table.substr(offset, end - offset));
  return true;
}

ElfDependencies DependencyProblem(ElfDependencies d, const char* why) {
  d.problem = why;
  return d;
}

}  // namespace

ElfDependencies ReadElfDependencies(ReadAtFn read) {
  ElfDependencies d;
  std::string bytes;
  if (!read(0, sizeof(Elf64_Ehdr), &bytes) || memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
      static_cast<unsigned char>(bytes[EI_CLASS]) != ELFCLASS64 ||
      static_cast<unsigned char>(bytes[EI_DATA]) != ELFDATA2LSB) {
    return DependencyProblem(d, "not a 64-bit little-endian ELF");
  }
  Elf64_Ehdr eh;
  memcpy(&eh, bytes.data(), sizeof(eh));
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 128 ||
      !read(eh.e_phoff, size_t{eh.e_phnum} * sizeof(Elf64_Phdr), &bytes)) {
    return DependencyProblem(d, "unreadable ELF program headers");
  }
  std::vector<Elf64_Phdr> loads;
  const Elf64_Phdr* dynamic = nullptr;
  std::vector<Elf64_Phdr> headers(eh.e_phnum);
  memcpy(headers.data(), bytes.data(), bytes.size());
  for (const Elf64_Phdr& ph : headers) {
    if (ph.p_type == PT_LOAD) loads.push_back(ph);
    if (ph.p_type == PT_DYNAMIC && dynamic == nullptr) dynamic = &ph;
    if (ph.p_type == PT_INTERP && ph.p_filesz >= 2 && ph.p_filesz <= 4096 &&
        read(ph.p_offset, ph.p_filesz, &bytes) && bytes.back() == '\0') {
      d.interpreter = bytes.substr(0, bytes.find('\0'));
    }
  }
  d.is_elf = true;
  if (dynamic == nullptr) return d;  // static: needs nothing
  if (dynamic->p_filesz > kMaxDynamicBytes || !read(dynamic->p_offset, dynamic->p_filesz, &bytes)) {
    return DependencyProblem(d, "an unreadable dynamic section");
  }
  std::vector<uint64_t> needed;
  uint64_t strtab = 0, strsz = 0, runpath = 0, rpath = 0;
  bool has_strtab = false, has_runpath = false, has_rpath = false;
  for (size_t at = 0; at + sizeof(Elf64_Dyn) <= bytes.size(); at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn dyn;
    memcpy(&dyn, bytes.data() + at, sizeof(dyn));
    if (dyn.d_tag == DT_NULL) break;
    const uint64_t v = dyn.d_un.d_val;
    switch (dyn.d_tag) {
      case DT_NEEDED: if (needed.size() < 1024) needed.push_back(v); break;
      case DT_STRTAB: strtab = v; has_strtab = true; break;
      case DT_STRSZ: strsz = v; break;
      case DT_RUNPATH: runpath = v; has_runpath = true; break;
      case DT_RPATH: rpath = v; has_rpath = true; break;
      default: break;
    }
  }
  if (needed.empty() && !has_runpath && !has_rpath) return d;
  if (!has_strtab || strsz == 0 || strsz > kMaxDynamicBytes) {
    return DependencyProblem(d, "no usable dynamic string table");
  }
  // DT_STRTAB is an address: the file offset is where a PT_LOAD maps it from.
  uint64_t offset = 0;
  bool mapped = false;
  for (const Elf64_Phdr& ph : loads) {
    if (strtab >= ph.p_vaddr && strtab - ph.p_vaddr < ph.p_filesz &&
        ph.p_filesz - (strtab - ph.p_vaddr) >= strsz) {
      offset = ph.p_offset + (strtab - ph.p_vaddr);
      mapped = true;
      break;
    }
  }
  std::string table;
  if (!mapped || !read(offset, strsz, &table)) return DependencyProblem(d, "an unmapped string table");
  std::string s;
  for (uint64_t n : needed) {
    if (!StringAt(table, n, &s)) return DependencyProblem(d, "a DT_NEEDED outside the string table");
    d.needed.push_back(s);
  }
  if (has_runpath || has_rpath) {
    if (!StringAt(table, has_runpath ? runpath : rpath, &s)) {
      return DependencyProblem(d, "a search path outside the string table");
    }
    for (size_t start = 0; start <= s.size();) {
      size_t colon = s.find(':', start);
      if (colon == std::string::npos) colon = s.size();
      if (colon > start) d.search.push_back(s.substr(start, colon - start));
      start = colon + 1;
    }
  }
  return d;
}

std::vector<std::pair<std::string, std::string>> ReadLoaderCache(absl::string_view bytes) {
  // glibc's cache_file_new: magic "glibc-ld.so.cache" "1.1", nlibs, len_strings, flags,
  // padding, extension offset, unused (48 bytes); then nlibs entries of {int32 flags,
  // uint32 key, uint32 value, uint32 osversion, uint64 hwcap} (24 bytes). Key and value
  // are offsets from the start of the file.
  constexpr absl::string_view kMagic = "glibc-ld.so.cache1.1";
  constexpr size_t kHeader = 48, kEntry = 24;
  constexpr int32_t kElfLibc6X8664 = 0x0303;  // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
  std::vector<std::pair<std::string, std::string>> out;
  if (bytes.size() < kHeader || bytes.substr(0, kMagic.size()) != kMagic) return out;
  uint32_t nlibs;
  memcpy(&nlibs, bytes.data() + kMagic.size(), sizeof(nlibs));
  for (uint64_t i = 0; i < nlibs; ++i) {
    const uint64_t at = kHeader + i * kEntry;
    if (at + kEntry > bytes.size()) break;
    int32_t flags;
    uint32_t key, value;
    memcpy(&flags, bytes.data() + at, 4);
    memcpy(&key, bytes.data() + at + 4, 4);
    memcpy(&value, bytes.data() + at + 8, 4);
    if (flags != kElfLibc6X8664) continue;
    std::string name, path;
    if (!StringAt(bytes, key, &name) || !StringAt(bytes, value, &path)) break;
    out.emplace_back(std::move(name), std::move(path));
  }
  return out;
}

ExecFormat ReadExecFormat(absl::string_view head) {
  if (head.size() > kExecHeadBytes) head = head.substr(0, kExecHeadBytes);
  if (head.size() >= 4 && memcmp(head.data(), ELFMAG, SELFMAG) == 0) return Elf(head);
  if (head.size() >= 2 && head[0] == '#' && head[1] == '!') return Script(head);
  return Problem(ExecFormat::kUnknown, "neither an ELF program nor a #! script");
}

}  // namespace gantry::sandbox
