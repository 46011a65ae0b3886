// Attacker code for exec_supervisor_test: run inside a sandbox (copied into the
// workspace and granted as an executable), it tries to exec a program in ways that
// race or sidestep the exec supervisor, and prints "errno=N" when the exec failed.
//   exec_attempts MODE PATH [ARGS...]
// MODE: plain, thread (exec while a second thread runs), vfork-thread (vfork from a
// process with a second thread), shared (the path and argv in MAP_SHARED memory),
// clone-vm (clone(CLONE_VM) without CLONE_THREAD or CLONE_VFORK), fd (execveat of an
// open descriptor), vfork (a single-threaded vfork child execs), grandchild (fork,
// fork, exec), argv0 (exec PATH with argv[0] set to
// the next argument: exec_attempts argv0 PATH NAME [ARGS...]), mapped (the path to
// exec is read from a private mapping of the file named first: exec_attempts mapped
// FILE ARGV0 [ARGS...]).
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

extern char** environ;

namespace {

int Report(int err) {
  printf("errno=%d\n", err);
  fflush(stdout);
  return 0;
}

int ChildMain(void* arg) {
  char** argv = static_cast<char**>(arg);
  execv(argv[0], argv);
  _exit(errno);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  char** target = argv + 2;
  if (strcmp(mode, "plain") == 0) {
    execv(target[0], target);
    return Report(errno);
  }
  if (strcmp(mode, "thread") == 0) {
    std::thread t([] { pause(); });
    t.detach();
    execv(target[0], target);
    return Report(errno);
  }
  if (strcmp(mode, "vfork-thread") == 0) {
    std::thread t([] { pause(); });
    t.detach();
    pid_t pid = vfork();
    if (pid == 0) {
      execv(target[0], target);
      _exit(errno);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return Report(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  if (strcmp(mode, "vfork") == 0) {
    pid_t pid = vfork();
    if (pid == 0) {
      execv(target[0], target);
      _exit(errno);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return Report(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  if (strcmp(mode, "shared") == 0) {
    char* mem = static_cast<char*>(
        mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (mem == MAP_FAILED) return Report(errno);
    char** vec = reinterpret_cast<char**>(mem);
    char* strings = mem + 4096;
    int n = 0;
    for (; target[n] != nullptr && n < 64; ++n) {
      strcpy(strings, target[n]);
      vec[n] = strings;
      strings += strlen(target[n]) + 1;
    }
    vec[n] = nullptr;
    execve(vec[0], vec, environ);
    return Report(errno);
  }
  if (strcmp(mode, "clone-vm") == 0) {
    static char stack[1 << 16];
    int pid = clone(ChildMain, stack + sizeof(stack), CLONE_VM | SIGCHLD, target);
    if (pid < 0) return Report(errno);
    int status = 0;
    waitpid(pid, &status, 0);
    return Report(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  if (strcmp(mode, "fd") == 0) {
    int fd = open(target[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Report(errno);
    syscall(SYS_execveat, fd, "", target, environ, AT_EMPTY_PATH);
    return Report(errno);
  }
  if (strcmp(mode, "argv0") == 0) {
    if (argc < 4) return 2;
    execv(target[0], target + 1);
    return Report(errno);
  }
  if (strcmp(mode, "mapped") == 0) {
    if (argc < 4) return 2;
    int fd = open(target[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Report(errno);
    void* text = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (text == MAP_FAILED) return Report(errno);
    execve(static_cast<const char*>(text), target + 1, environ);
    return Report(errno);
  }
  if (strcmp(mode, "grandchild") == 0) {
    pid_t child = fork();
    if (child == 0) {
      pid_t grandchild = fork();
      if (grandchild == 0) {
        execv(target[0], target);
        _exit(errno);
      }
      int status = 0;
      waitpid(grandchild, &status, 0);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 255);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return Report(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return 2;
}
