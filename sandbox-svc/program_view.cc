#include "sandbox-svc/program_view.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "absl/container/flat_hash_map.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/file.h"
#include "sandbox-svc/exec_format.h"
#include "sandbox-svc/exec_supervisor.h"

namespace gantry::sandbox {
namespace {

// Where the loader looks after DT_RUNPATH and its cache (Debian's multiarch first).
constexpr const char* kDefaultLibraryDirs[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                               "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
constexpr int kMaxLinkHops = 40;
constexpr size_t kMaxElfObjects = 4096;

bool UnderUsr(absl::string_view path) { return absl::StartsWith(path, "/usr/"); }

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }


// Whether `path` is an x86-64 ELF shared object (e_type ET_DYN), the only kind of file
// the loader maps for a DT_NEEDED name: a program's DT_NEEDED ("os-release") must not
// bring any other file of the library directories into the view.
bool IsSharedObject(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  Elf64_Ehdr eh;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            pread(fd, &eh, sizeof(eh), 0) == static_cast<ssize_t>(sizeof(eh)) &&
            memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
            eh.e_ident[EI_DATA] == ELFDATA2LSB && eh.e_type == ET_DYN &&
            eh.e_machine == EM_X86_64;
  close(fd);
  return ok;
}

// /etc/ld.so.cache by library name.
using LoaderIndex = absl::flat_hash_map<std::string, std::vector<std::string>>;

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

// The loader's cache, read again only when the file changed (ldconfig writes a new one
// whenever a library package is installed or removed).
std::shared_ptr<const LoaderIndex> CurrentLoaderIndex() {
  static std::mutex mu;
  static std::shared_ptr<const LoaderIndex>* index = new std::shared_ptr<const LoaderIndex>;
  static struct stat seen;
  struct stat st;
  if (stat("/etc/ld.so.cache", &st) != 0) return std::make_shared<const LoaderIndex>();
  std::lock_guard<std::mutex> lock(mu);
  if (*index != nullptr && SameFile(st, seen)) return *index;
  auto fresh = std::make_shared<LoaderIndex>();
  if (auto bytes = ReadFileToString("/etc/ld.so.cache", size_t{16} << 20); bytes.ok()) {
    for (auto& [name, path] : ReadLoaderCache(*bytes)) (*fresh)[name].push_back(std::move(path));
  }
  *index = std::move(fresh);
  seen = st;
  return *index;
}

class Planner {
 public:
  explicit Planner(std::shared_ptr<const LoaderIndex> cache) : cache_(std::move(cache)) {}

  // A program in the workspace: only what it asks of the host (above).
  void AddWorkspaceProgram(const std::string& workspace, const std::string& relative) {
    int fd = OpenWorkspaceFile(workspace, relative);
    if (fd < 0) return;
    AddDependencies(fd, "", /*own_search=*/false);
    close(fd);
  }

  void AddProgram(const std::string& path) {
    AddFile(path);
    std::string canonical = Walk(path, nullptr);
    const std::string name = Basename(canonical);
    if (absl::StartsWith(name, "python3.")) {
      const std::string lib = absl::StrCat("/usr/lib/", name);
      AddTree(lib);
      AddTree("/usr/lib/python3/dist-packages");
      AddLibrariesOf(absl::StrCat(lib, "/lib-dynload"));
    } else if (absl::StartsWith(name, "perl")) {
      for (const char* tree : {"/usr/share/perl", "/usr/share/perl5", "/usr/lib/x86_64-linux-gnu/perl",
                               "/usr/lib/x86_64-linux-gnu/perl5",
                               "/usr/lib/x86_64-linux-gnu/perl-base"}) {
        AddTree(tree);
      }
    } else if (name == "git") {
      AddTree("/usr/share/git-core");
    }
  }

  ProgramView Finish() {
    while (!elves_.empty()) {
      std::string path = std::move(elves_.front());
      elves_.pop_front();
      AddDependencies(path);
    }
    ProgramView view;
    auto in_tree = [this](const std::string& path) {
      for (const std::string& tree : trees_) {
        if (path.size() > tree.size() && absl::StartsWith(path, tree) && path[tree.size()] == '/') {
          return true;
        }
      }
      return false;
    };
    for (const auto& tree : trees_) {
      if (!in_tree(tree)) view.trees.push_back(tree);
    }
    for (const auto& dir : dirs_) {
      if (!in_tree(dir)) view.dirs.push_back(dir);
    }
    for (const auto& [path, target] : links_) {
      if (!in_tree(path)) view.links.emplace_back(path, target);
    }
    for (const auto& file : files_) {
      if (!in_tree(file)) view.files.push_back(file);
    }
    view.missing.assign(missing_.begin(), missing_.end());
    view.etc_links.assign(etc_links_.begin(), etc_links_.end());
    return view;
  }

 private:
  // Resolves `path` on the host as the kernel does (each link replaced by its target,
  // ".." taken from the resolved directory), recording every link and directory under
  // /usr on the way. Returns the resolved path, or "" when some part does not exist.
  std::string Walk(const std::string& path, struct stat* final_stat) {
    std::deque<std::string> rest;
    for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) rest.emplace_back(part);
    std::string cur = "/";
    int hops = 0;
    struct stat st;
    st.st_mode = S_IFDIR;
    while (!rest.empty()) {
      if (!S_ISDIR(st.st_mode)) return "";
      std::string part = std::move(rest.front());
      rest.pop_front();
      if (part == ".") continue;
      if (part == "..") {
        cur = Parent(cur);
        continue;
      }
      std::string next = cur == "/" ? absl::StrCat("/", part) : absl::StrCat(cur, "/", part);
      if (lstat(next.c_str(), &st) != 0) return "";
      if (S_ISLNK(st.st_mode)) {
        if (++hops > kMaxLinkHops) return "";
        char target[4096];
        ssize_t n = readlink(next.c_str(), target, sizeof(target) - 1);
        if (n <= 0) return "";
        std::string t(target, static_cast<size_t>(n));
        if (UnderUsr(next)) links_.emplace(next, t);
        if (absl::StartsWith(next, "/etc/alternatives/")) etc_links_.emplace(next, t);
        std::vector<std::string> parts;
        for (absl::string_view p : absl::StrSplit(t, '/', absl::SkipEmpty())) parts.emplace_back(p);
        rest.insert(rest.begin(), parts.begin(), parts.end());
        if (!t.empty() && t[0] == '/') cur = "/";
        st.st_mode = S_IFDIR;  // the link's directory, from which its target is read
        continue;
      }
      cur = std::move(next);
      if (S_ISDIR(st.st_mode) && UnderUsr(cur)) dirs_.insert(cur);
    }
    if (final_stat != nullptr) *final_stat = st;
    return cur;
  }

  // Adds the file at `path` (and the links to it); an ELF file's needs follow.
  bool AddFile(const std::string& path) {
    struct stat st;
    std::string file = Walk(path, &st);
    if (file.empty() || !S_ISREG(st.st_mode)) return false;
    if (UnderUsr(file) && files_.insert(file).second) dirs_.insert(Parent(file));
    if (elf_seen_.size() < kMaxElfObjects && elf_seen_.insert(file).second) elves_.push_back(file);
    return true;
  }

  void AddTree(const std::string& path) {
    struct stat st;
    std::string dir = Walk(path, &st);
    if (dir.empty() || !S_ISDIR(st.st_mode) || !UnderUsr(dir)) return;
    trees_.insert(dir);
  }

  // The libraries that the ELF files directly in `dir` need (the files themselves come
  // with a tree).
  void AddLibrariesOf(const std::string& dir) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!absl::EndsWith(name, ".so")) continue;
      std::string path = absl::StrCat(dir, "/", name);
      if (elf_seen_.size() < kMaxElfObjects && elf_seen_.insert(path).second) elves_.push_back(path);
    }
    closedir(d);
  }

  void AddDependencies(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    AddDependencies(fd, Parent(path), /*own_search=*/true);
    close(fd);
  }

  // What the ELF object open at `fd` loads. `origin`: its directory ($ORIGIN);
  // `own_search`: whether its DT_RUNPATH is followed.
  void AddDependencies(int fd, const std::string& origin, bool own_search) {
    auto read_at = [fd](uint64_t offset, size_t n, std::string* out) {
      out->resize(n);
      size_t got = 0;
      while (got < n) {
        ssize_t r = pread(fd, out->data() + got, n - got, static_cast<off_t>(offset + got));
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
      }
      return true;
    };
    ElfDependencies deps = ReadElfDependencies(read_at);
    if (!deps.is_elf) return;
    // Only the system loader: the exec supervisor refuses any other PT_INTERP, so a
    // program (a workspace one is anyone's) cannot pull another host file into view.
    if (deps.interpreter == kSystemLoader) AddFile(deps.interpreter);
    if (!own_search) deps.search.clear();
    for (const std::string& name : deps.needed) {
      if (name.find('/') != std::string::npos) {
        if (!own_search) {
          missing_.insert(name);
          continue;
        }
        const std::string path = name[0] == '/' ? name : absl::StrCat(origin, "/", name);
        if (!IsSharedObject(path) || !AddFile(path)) missing_.insert(name);
        continue;
      }
      if (!FindLibrary(name, deps.search, origin)) missing_.insert(name);
    }
  }

  bool FindLibrary(const std::string& name, const std::vector<std::string>& search,
                   const std::string& origin) {
    for (std::string dir : search) {
      absl::StrReplaceAll({{"${ORIGIN}", origin}, {"$ORIGIN", origin}}, &dir);
      std::string candidate = absl::StrCat(dir, "/", name);
      if (IsSharedObject(candidate)) return AddFile(candidate);
    }
    bool found = false;
    if (auto it = cache_->find(name); it != cache_->end()) {
      for (const std::string& path : it->second) {
        if (IsSharedObject(path)) found = AddFile(path) || found;
      }
    }
    if (found) return true;
    for (const char* dir : kDefaultLibraryDirs) {
      std::string candidate = absl::StrCat(dir, "/", name);
      if (IsSharedObject(candidate)) return AddFile(candidate);
    }
    return false;
  }

  std::shared_ptr<const LoaderIndex> cache_;
  std::set<std::string> dirs_, files_, trees_, missing_;
  std::map<std::string, std::string> links_, etc_links_;
  std::set<std::string> elf_seen_;
  std::deque<std::string> elves_;
};

}  // namespace

namespace {

// Recent views of program sets outside the workspace, each valid while the loader's
// cache and every program's file are the ones it was planned with.
struct KeptView {
  std::shared_ptr<const LoaderIndex> cache;
  std::vector<struct stat> programs;
  ProgramView view;
};
constexpr size_t kKeptViews = 64;

bool StatAll(const std::vector<std::string>& paths, std::vector<struct stat>* out) {
  out->resize(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (stat(paths[i].c_str(), &(*out)[i]) != 0) return false;
  }
  return true;
}

}  // namespace

int OpenWorkspaceFile(const std::string& workspace, const std::string& relative) {
  int ws = open(workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (ws < 0) return -1;
  open_how how;
  memset(&how, 0, sizeof(how));
  how.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(syscall(SYS_openat2, ws, relative.c_str(), &how, sizeof(how)));
  close(ws);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
  }
  return fd;
}

ProgramView PlanProgramView(const std::vector<std::string>& programs, const std::string& workspace) {
  constexpr absl::string_view kWorkspace = "/workspace/";
  static std::mutex mu;
  static auto* kept = new absl::flat_hash_map<std::string, KeptView>;
  std::shared_ptr<const LoaderIndex> cache = CurrentLoaderIndex();
  bool keepable = true;
  for (const std::string& program : programs) keepable = keepable && !absl::StartsWith(program, kWorkspace);
  const std::string key = absl::StrJoin(programs, std::string(1, '\0'));
  std::vector<struct stat> stats;
  if (keepable && StatAll(programs, &stats)) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = kept->find(key);
    if (it != kept->end() && it->second.cache == cache &&
        std::equal(stats.begin(), stats.end(), it->second.programs.begin(), it->second.programs.end(),
                   [](const struct stat& a, const struct stat& b) { return SameFile(a, b); })) {
      return it->second.view;
    }
  } else {
    keepable = false;
  }
  Planner planner(cache);
  for (const std::string& program : programs) {
    if (absl::StartsWith(program, kWorkspace)) {
      if (!workspace.empty()) planner.AddWorkspaceProgram(workspace, program.substr(kWorkspace.size()));
    } else {
      planner.AddProgram(program);
    }
  }
  ProgramView view = planner.Finish();
  if (keepable) {
    std::lock_guard<std::mutex> lock(mu);
    if (kept->size() >= kKeptViews) kept->clear();
    (*kept)[key] = KeptView{cache, std::move(stats), view};
  }
  return view;
}

}  // namespace gantry::sandbox
