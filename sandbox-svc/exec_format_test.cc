#include "sandbox-svc/exec_format.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace gantry::sandbox {
namespace {

std::string Head(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::string s(kExecHeadBytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// A minimal 64-bit ELF header with one PT_INTERP program header naming `interp`.
std::string ElfWithInterp(const std::string& interp, bool nul = true) {
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof(eh));
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  Elf64_Phdr ph;
  memset(&ph, 0, sizeof(ph));
  ph.p_type = PT_INTERP;
  ph.p_offset = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
  ph.p_filesz = interp.size() + (nul ? 1 : 0);
  std::string out(reinterpret_cast<const char*>(&eh), sizeof(eh));
  out.append(reinterpret_cast<const char*>(&ph), sizeof(ph));
  out.append(interp);
  if (nul) out.push_back('\0');
  return out;
}

TEST(ExecFormat, TheSystemsOwnProgramsAreDynamicElfs) {
  ExecFormat f = ReadExecFormat(Head("/usr/bin/true"));
  EXPECT_EQ(f.kind, ExecFormat::kElf);
  EXPECT_EQ(f.problem, "");
  EXPECT_EQ(f.interpreter, "/lib64/ld-linux-x86-64.so.2");
}

TEST(ExecFormat, PtInterpIsReadExactly) {
  EXPECT_EQ(ReadExecFormat(ElfWithInterp("/workspace/evil")).interpreter, "/workspace/evil");
  // No terminating NUL, a NUL inside, a header pointing past the bytes: problems.
  EXPECT_NE(ReadExecFormat(ElfWithInterp("/x", false)).problem, "");
  EXPECT_NE(ReadExecFormat(ElfWithInterp(std::string("/a\0b", 4))).problem, "");
  std::string cut = ElfWithInterp("/lib64/ld-linux-x86-64.so.2");
  cut.resize(cut.size() - 5);
  EXPECT_NE(ReadExecFormat(cut).problem, "");
  // Two PT_INTERP headers are refused; a 32-bit ELF is not read.
  std::string two = ElfWithInterp("/a");
  reinterpret_cast<Elf64_Ehdr*>(two.data())->e_phnum = 2;
  EXPECT_NE(ReadExecFormat(two).problem, "");
  std::string elf32 = ElfWithInterp("/a");
  elf32[EI_CLASS] = ELFCLASS32;
  EXPECT_NE(ReadExecFormat(elf32).problem, "");
  EXPECT_EQ(ReadExecFormat(elf32).kind, ExecFormat::kElf);
}

TEST(ExecFormat, ScriptsAsTheKernelReadsThem) {
  ExecFormat a = ReadExecFormat("#!/bin/sh\necho hi\n");
  EXPECT_EQ(a.kind, ExecFormat::kScript);
  EXPECT_EQ(a.interpreter, "/bin/sh");
  EXPECT_EQ(a.interpreter_arg, "");
  ExecFormat b = ReadExecFormat("#! \t/usr/bin/env  python3 -u  \nx");
  EXPECT_EQ(b.interpreter, "/usr/bin/env");
  EXPECT_EQ(b.interpreter_arg, "python3 -u");  // one argument, as Linux passes it
  ExecFormat c = ReadExecFormat("#!relative/interp");
  EXPECT_EQ(c.interpreter, "relative/interp");
  EXPECT_NE(ReadExecFormat("#!\n").problem, "");
  EXPECT_NE(ReadExecFormat("#!   ").problem, "");
  // An interpreter name longer than the kernel's 256-byte line is an error.
  EXPECT_NE(ReadExecFormat("#!/" + std::string(300, 'a')).problem, "");
  // A long argument is cut where the kernel cuts it, the interpreter kept.
  ExecFormat d = ReadExecFormat("#!/bin/sh " + std::string(300, 'b') + "\n");
  EXPECT_EQ(d.problem, "");
  EXPECT_EQ(d.interpreter, "/bin/sh");
  EXPECT_LT(d.interpreter_arg.size(), 256u);
}

TEST(ExecFormat, AnythingElseIsUnknown) {
  for (const std::string& head : {std::string(""), std::string("#"), std::string("\x7f" "EL"),
                                  std::string("MZ\x90"), std::string("plain text")}) {
    ExecFormat f = ReadExecFormat(head);
    EXPECT_EQ(f.kind, ExecFormat::kUnknown) << head;
    EXPECT_NE(f.problem, "");
  }
}

}  // namespace
}  // namespace gantry::sandbox
