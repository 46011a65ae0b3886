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
// FILE ARGV0 [ARGS...]), orphan-flip (a red team's race: exec_attempts orphan-flip
// ALLOWED DENIED ARG, 100 tries: this process vforks P, P vforks C, C kills P and
// execs [ALLOWED, ARG] from a path this process, running again in C's memory once P
// is dead, keeps flipping to DENIED; C, re-parented, seemed to own its memory).
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

// orphan-flip: the state the three processes share (one address space).
char flip_path[256];
char* flip_argv[3];
const char* flip_allowed;
const char* flip_denied;
char flip_stack_p[1 << 16], flip_stack_c[1 << 16];

int FlipChild(void*) {
  const pid_t parent = getppid();
  kill(parent, SIGKILL);
  while (getppid() == parent) {
  }
  execve(flip_path, flip_argv, environ);
  _exit(99);
}

int FlipMiddle(void*) {
  clone(FlipChild, flip_stack_c + sizeof(flip_stack_c), CLONE_VM | CLONE_VFORK | SIGCHLD, nullptr);
  _exit(0);
}

int OrphanFlip(char** target) {
  flip_allowed = target[0];
  flip_denied = target[1];
  flip_argv[0] = target[0];
  flip_argv[1] = target[2];
  flip_argv[2] = nullptr;
  const size_t a = strlen(flip_allowed) + 1, d = strlen(flip_denied) + 1;
  if (a > sizeof(flip_path) || d > sizeof(flip_path)) return 2;
  for (int t = 0; t < 100; ++t) {
    memcpy(flip_path, flip_allowed, a);
    pid_t p = clone(FlipMiddle, flip_stack_p + sizeof(flip_stack_p),
                    CLONE_VM | CLONE_VFORK | SIGCHLD, nullptr);
    if (p < 0) return Report(errno);
    for (int i = 0; i < 3000000; ++i) {
      memcpy(flip_path, flip_denied, d);
      __asm__ volatile("" ::: "memory");
      memcpy(flip_path, flip_allowed, a);
      __asm__ volatile("" ::: "memory");
    }
    waitpid(p, nullptr, 0);
    usleep(10000);
  }
  return Report(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  char** target = argv + 2;
  if (strcmp(mode, "orphan-flip") == 0) return argc >= 5 ? OrphanFlip(target) : 2;
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
