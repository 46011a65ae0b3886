// The sandbox's /usr when a call's programs are known (IsolationSpec::only_programs):
// only what those programs need to run, everything else absent (docs/sandbox.md,
// "The program view").
//
// What a program needs, read from the host:
//  - the chain of symbolic links from each program's path to its file (/usr/bin/python3
//    -> python3.11), recreated as links;
//  - for an ELF file, its PT_INTERP loader (only the system loader, kSystemLoader: the
//    exec supervisor refuses any other) and, transitively, every DT_NEEDED library,
//    found as the loader finds it: DT_RUNPATH (else DT_RPATH, "$ORIGIN" expanded), then
//    /etc/ld.so.cache, then the default directories;
//  - for the interpreters that read a library tree at start (python3.N, perl) and for
//    git (its templates), those trees, bound whole, and for python the libraries of its
//    extension modules (lib-dynload);
//  - every directory on those paths, created empty.
// Only paths under /usr are planned (/bin, /lib, /lib64 are links into it on the hosts
// this runs on; HostSystemLayout keeps them). A library the loader would not find is
// left out (the program then fails to start, as it would on a host without it) and
// named in `missing`.
//
// A plan of programs outside the workspace is kept (the last 64 sets) and used again
// while /etc/ld.so.cache (which ldconfig rewrites whenever a library package comes or
// goes) and every program's file (device, inode, size, mtime) are unchanged.
//
// Thread-safety: PlanProgramView reads the host's files only; safe from any thread.
#ifndef GANTRY_SANDBOX_SVC_PROGRAM_VIEW_H_
#define GANTRY_SANDBOX_SVC_PROGRAM_VIEW_H_

#include <string>
#include <utility>
#include <vector>

namespace gantry::sandbox {

struct ProgramView {
  // Absolute host paths, each also the path inside the sandbox; all under /usr.
  std::vector<std::string> dirs;                             // to create, parents first
  std::vector<std::pair<std::string, std::string>> links;   // path, target as read
  std::vector<std::string> files;                            // regular files, bound read-only
  std::vector<std::string> trees;                            // directories, bound read-only
  std::vector<std::string> missing;                          // libraries not found
  // Links under /etc/alternatives that a program's path goes through (/usr/bin/awk ->
  // /etc/alternatives/awk -> /usr/bin/mawk), recreated instead of binding the whole
  // directory, which would tell what else the host has installed.
  std::vector<std::pair<std::string, std::string>> etc_links;
};

// The view of `programs` (absolute paths as the rules name them, inside the sandbox).
// A program under /workspace is the file at the same place under `workspace` (the
// host path of the sandbox's /workspace; "" for none): the file itself comes with the
// workspace, the view gets its loader and the libraries it names, looked up in
// /etc/ld.so.cache and the default directories only (its own DT_RUNPATH is the
// workspace's, not the host's). It is opened beneath `workspace` without following a
// link that leaves it, and only when it is a regular file.
ProgramView PlanProgramView(const std::vector<std::string>& programs,
                            const std::string& workspace = "");

// The regular file at `relative` beneath the host directory `workspace`, opened
// read-only without following a link that leaves it (openat2 RESOLVE_BENEATH); -1 when
// there is none. The caller closes it.
int OpenWorkspaceFile(const std::string& workspace, const std::string& relative);

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_PROGRAM_VIEW_H_
