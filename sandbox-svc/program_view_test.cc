// The program view against the real loader: the libraries ldd(1) (the loader itself,
// in trace mode) loads for a program are the ones the view binds, and
// /etc/ld.so.cache reads as ldconfig -p prints it.
#include "sandbox-svc/program_view.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "sandbox-svc/exec_format.h"

namespace gantry::sandbox {
namespace {

std::string Output(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? buf : "";
}

// The files ldd says `program` loads, resolved (the loader included).
std::set<std::string> LddFiles(const std::string& program) {
  std::set<std::string> files;
  for (absl::string_view line : absl::StrSplit(Output("ldd " + program), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "linux-vdso")) continue;
    size_t arrow = line.find("=> ");
    absl::string_view path = arrow == absl::string_view::npos ? line : line.substr(arrow + 3);
    path = path.substr(0, path.find(" ("));
    if (absl::StartsWith(path, "/")) files.insert(RealPath(std::string(path)));
  }
  return files;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ProgramViewTest, HoldsWhatTheLoaderLoadsAndNothingElse) {
  for (const char* program : {"/usr/bin/cat", "/usr/bin/git", "/usr/bin/ls", "/usr/bin/prlimit"}) {
    std::set<std::string> want = LddFiles(program);
    ASSERT_GE(want.size(), 2u) << program;  // libc and the loader at least
    ProgramView view = PlanProgramView({program});
    EXPECT_TRUE(view.missing.empty()) << program << ": " << view.missing.front();
    EXPECT_TRUE(Contains(view.files, RealPath(program))) << program;
    for (const std::string& file : want) EXPECT_TRUE(Contains(view.files, file)) << program << " needs " << file;
    // Only the program, its loader and its libraries: no other file of /usr/bin.
    for (const std::string& file : view.files) {
      EXPECT_TRUE(file == RealPath(program) || want.count(file)) << program << ": " << file;
    }
    for (const std::string& dir : view.dirs) EXPECT_TRUE(absl::StartsWith(dir, "/usr/")) << dir;
  }
}

TEST(ProgramViewTest, LinksAreKeptAndInterpretersGetTheirTrees) {
  const std::string python = RealPath("/usr/bin/python3");
  ASSERT_TRUE(absl::StartsWith(python, "/usr/bin/python3.")) << python;
  ProgramView view = PlanProgramView({"/usr/bin/python3"});
  bool link = false;
  for (const auto& [path, target] : view.links) link = link || path == "/usr/bin/python3";
  EXPECT_TRUE(link);
  const std::string lib = "/usr/lib/" + python.substr(python.rfind('/') + 1);
  EXPECT_TRUE(Contains(view.trees, lib));
  // Files inside a tree come with it; directories inside it are not made.
  for (const std::string& file : view.files) EXPECT_FALSE(absl::StartsWith(file, lib + "/")) << file;
  for (const std::string& dir : view.dirs) EXPECT_FALSE(absl::StartsWith(dir, lib + "/")) << dir;
  // The libraries its extension modules load (the ssl module: libssl) are there too.
  const std::string ssl = lib + "/lib-dynload";
  std::string module = Output("ls " + ssl + " | grep '^_ssl\\.'");
  if (!module.empty()) {
    module = ssl + "/" + std::string(absl::StripAsciiWhitespace(module));
    for (const std::string& file : LddFiles(module)) EXPECT_TRUE(Contains(view.files, file)) << file;
  }
  // Nothing of another program.
  EXPECT_FALSE(Contains(view.files, RealPath("/usr/bin/perl")));
  EXPECT_FALSE(Contains(view.files, RealPath("/usr/bin/id")));
}

// A program in the workspace (anyone's file) gets the system loader and the libraries
// it names from the host's library directories, and nothing it could name otherwise.
TEST(ProgramViewTest, AWorkspaceProgramCannotPullInOtherHostFiles) {
  char tmpl[] = "/tmp/program-view-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string ws = tmpl;
  std::ifstream in("/usr/bin/true", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string elf = ss.str();
  auto write = [&ws](const std::string& name, const std::string& bytes) {
    std::ofstream(ws + "/" + name, std::ios::binary) << bytes;
  };
  write("plain", elf);
  // The same program with PT_INTERP naming another host program (padded with NULs).
  std::string other = elf;
  const std::string loader = "/lib64/ld-linux-x86-64.so.2";
  size_t at = other.find(loader);
  ASSERT_NE(at, std::string::npos);
  const std::string id = "/usr/bin/id";
  other.replace(at, loader.size(), id + std::string(loader.size() - id.size(), '\0'));
  write("other-loader", other);
  ASSERT_EQ(symlink("/usr/bin/id", (ws + "/link-out").c_str()), 0);

  ProgramView plain = PlanProgramView({"/workspace/plain"}, ws);
  for (const std::string& file : LddFiles("/usr/bin/true")) EXPECT_TRUE(Contains(plain.files, file)) << file;
  EXPECT_FALSE(Contains(plain.files, RealPath("/usr/bin/true")));  // the workspace holds it

  ProgramView odd = PlanProgramView({"/workspace/other-loader"}, ws);
  EXPECT_FALSE(Contains(odd.files, RealPath("/usr/bin/id")));
  // A link out of the workspace is not followed.
  ProgramView out = PlanProgramView({"/workspace/link-out"}, ws);
  EXPECT_TRUE(out.files.empty());

  // Found by a red team: a DT_NEEDED name is looked up in the library directories, and
  // any regular file found there came into view (NEEDED "os-release" brought
  // /usr/lib/os-release). Only an ELF shared object is taken: here the program names a
  // static archive or an object file beside the libraries instead of libc.so.6.
  std::string not_library;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib"}) {
    for (absl::string_view name : absl::StrSplit(Output(std::string("ls ") + dir), '\n')) {
      if (not_library.empty() && name.size() <= 9 && name.size() > 2 &&
          (absl::EndsWith(name, ".a") || absl::EndsWith(name, ".o"))) {
        not_library = std::string(name);
      }
    }
  }
  ASSERT_FALSE(not_library.empty()) << "no .a or .o file with a short name to name";
  std::string needs = elf;
  const std::string libc = std::string("libc.so.6") + '\0';
  at = needs.find(libc);
  ASSERT_NE(at, std::string::npos);
  needs.replace(at, libc.size(), not_library + std::string(libc.size() - not_library.size(), '\0'));
  write("needs-other-file", needs);
  ProgramView pulled = PlanProgramView({"/workspace/needs-other-file"}, ws);
  for (const std::string& file : pulled.files) {
    EXPECT_FALSE(absl::EndsWith(file, "/" + not_library)) << file;
  }
  EXPECT_TRUE(Contains(pulled.missing, not_library)) << not_library;
  std::system(("rm -rf '" + ws + "'").c_str());
}

// Debian's alternatives: the links a program goes through, and no other of the host's
// /etc/alternatives (which would tell what else is installed).
TEST(ProgramViewTest, OnlyTheAlternativesLinksOnAProgramsPath) {
  if (RealPath("/usr/bin/awk").empty()) GTEST_SKIP() << "no awk on this host";
  char buf[4096];
  ssize_t n = readlink("/usr/bin/awk", buf, sizeof(buf));
  ASSERT_GT(n, 0);
  const std::string target(buf, static_cast<size_t>(n));
  ProgramView view = PlanProgramView({"/usr/bin/awk", "/usr/bin/cat"});
  if (!absl::StartsWith(target, "/etc/alternatives/")) {
    EXPECT_TRUE(view.etc_links.empty());
    return;
  }
  ASSERT_EQ(view.etc_links.size(), 1u);
  EXPECT_EQ(view.etc_links[0].first, target);
  EXPECT_TRUE(Contains(view.files, RealPath("/usr/bin/awk")));
}

TEST(ProgramViewTest, AnAbsentProgramGivesNothing) {
  ProgramView view = PlanProgramView({"/usr/bin/no-such-program-here"});
  EXPECT_TRUE(view.files.empty());
  EXPECT_TRUE(view.trees.empty());
}

TEST(LoaderCacheTest, ReadsAsLdconfigPrintsIt) {
  std::ifstream in("/etc/ld.so.cache", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto entries = ReadLoaderCache(bytes.str());
  std::set<std::pair<std::string, std::string>> ours(entries.begin(), entries.end());
  std::set<std::pair<std::string, std::string>> theirs;
  for (absl::string_view line : absl::StrSplit(Output("/sbin/ldconfig -p"), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::StrContains(line, "(libc6,x86-64") || absl::StrContains(line, "hwcap")) continue;
    size_t space = line.find(' ');
    size_t arrow = line.find("=> ");
    ASSERT_NE(arrow, absl::string_view::npos) << line;
    theirs.emplace(std::string(line.substr(0, space)), std::string(line.substr(arrow + 3)));
  }
  ASSERT_GT(theirs.size(), 20u);
  EXPECT_EQ(ours, theirs);
  EXPECT_TRUE(ReadLoaderCache("").empty());
  EXPECT_TRUE(ReadLoaderCache(bytes.str().substr(0, 60)).empty());
}

TEST(ElfDependenciesTest, ReadsWhatReadelfReads) {
  std::ifstream in("/usr/bin/git", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  auto read = [&file](uint64_t offset, size_t n, std::string* out) {
    if (offset > file.size() || file.size() - offset < n) return false;
    *out = file.substr(offset, n);
    return true;
  };
  ElfDependencies deps = ReadElfDependencies(read);
  ASSERT_TRUE(deps.is_elf) << deps.problem;
  EXPECT_EQ(deps.problem, "");
  std::vector<std::string> want;
  for (absl::string_view line : absl::StrSplit(Output("readelf -d /usr/bin/git"), '\n')) {
    size_t open = line.find("Shared library: [");
    if (open == absl::string_view::npos) continue;
    line = line.substr(open + 17);
    want.emplace_back(line.substr(0, line.find(']')));
  }
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(deps.needed, want);
  EXPECT_EQ(deps.interpreter, "/lib64/ld-linux-x86-64.so.2");
  // Cut short anywhere: never more than the file says, never a crash.
  for (size_t cut : {size_t{0}, size_t{16}, size_t{64}, size_t{200}, file.size() / 2}) {
    const std::string part = file.substr(0, cut);
    auto read_part = [&part](uint64_t offset, size_t n, std::string* out) {
      if (offset > part.size() || part.size() - offset < n) return false;
      *out = part.substr(offset, n);
      return true;
    };
    ElfDependencies d = ReadElfDependencies(read_part);
    EXPECT_LE(d.needed.size(), want.size()) << cut;
  }
}

}  // namespace
}  // namespace gantry::sandbox
