// gantry-sandbox: runs tool calls (ToolCall in, ToolResult out over ZeroMQ) in fresh
// bubblewrap sandboxes for the callers it admits. See docs/sandbox.md ("Service") and
// sandbox-svc/tool_service.h.
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/curve_keys.h"
#include "common/log.h"
#include "policy/policy_reloader.h"
#include "sandbox-svc/tool_service.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

constexpr char kUsage[] =
    "Usage: gantry-sandbox --workspace-root DIR... --peer-uid UID=PRINCIPAL... [options]\n"
    "  --workspace-root DIR  workspaces must lie strictly beneath DIR (repeatable; at least\n"
    "                  one), reached through directories only root can change\n"
    "  --peer-uid UID=PRINCIPAL  admit callers on the Unix socket whose uid (a number or a\n"
    "                  user name) is UID; their calls run under PRINCIPAL, a user or service\n"
    "                  account of --policy (repeatable). Any other uid is refused\n"
    "                  (sandbox_peer_unknown)\n"
    "  --endpoint ipc://PATH  the Unix socket (default ipc:///run/gantry/sandbox.sock;\n"
    "                  'none' for CURVE only)\n"
    "  --socket-mode MODE   its file mode, octal (default 0600)\n"
    "  --socket-group GROUP its group (a name or a number; default the service's)\n"
    "  --curve-endpoint tcp://HOST:PORT  also serve tcp with CURVE (needs --curve-secret-key)\n"
    "  --curve-secret-key FILE  the service's CURVE secret key (gantry keys gen-curve)\n"
    "  --peer-key FILE=PRINCIPAL  admit the CURVE client whose public key is in FILE\n"
    "                  (repeatable); other keys are refused in the handshake\n"
    "  --workers N     calls run in parallel (default 4)\n"
    "  --queue N       calls waiting at most (default 64; then queue_full)\n"
    "  --policy FILE   the access policy (docs/policy.md): the caller's principal's command\n"
    "                  grants decide exec; reloaded when the file changes or on SIGHUP.\n"
    "                  Without it every exec is denied\n"
    "  --fallback-uid/--fallback-gid  ids for workspaces owned by root (default 65534;\n"
    "                  never 0)\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "gantry-sandbox: %s\n%s", why.c_str(), kUsage);
  return 2;
}

bool ParseUid(const std::string& s, uid_t* uid) {
  uint32_t n = 0;
  if (absl::SimpleAtoi(s, &n)) {
    *uid = n;
    return true;
  }
  struct passwd* pw = getpwnam(s.c_str());  // before any thread starts
  if (pw == nullptr) return false;
  *uid = pw->pw_uid;
  return true;
}

bool ParseGid(const std::string& s, gid_t* gid) {
  uint32_t n = 0;
  if (absl::SimpleAtoi(s, &n)) {
    *gid = n;
    return true;
  }
  struct group* gr = getgrnam(s.c_str());
  if (gr == nullptr) return false;
  *gid = gr->gr_gid;
  return true;
}

// "A=B" -> A, B (both non-empty; B the part after the last '=').
bool SplitMapping(const std::string& v, std::string* a, std::string* b) {
  size_t eq = v.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) return false;
  *a = v.substr(0, eq);
  *b = v.substr(eq + 1);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gantry::InitLogging("sandbox");
  gantry::sandbox::SandboxOptions sandbox_options;
  gantry::sandbox::ToolServiceOptions service_options;
  std::unique_ptr<gantry::policy::PolicyReloader> policy;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return Usage(a + " needs a value");
    std::string v = argv[++i];
    uint32_t n = 0;
    std::string left, right;
    if (a == "--endpoint") {
      service_options.endpoint = v == "none" ? "" : v;
    } else if (a == "--socket-mode" && v.find_first_not_of("01234567") == std::string::npos &&
               !v.empty() && v.size() <= 4) {
      service_options.socket_mode = static_cast<mode_t>(std::strtoul(v.c_str(), nullptr, 8));
    } else if (a == "--socket-group" && ParseGid(v, &service_options.socket_gid)) {
    } else if (a == "--peer-uid" && SplitMapping(v, &left, &right)) {
      uid_t uid = 0;
      if (!ParseUid(left, &uid)) return Usage(absl::StrCat("--peer-uid: no user ", left));
      if (!service_options.peer_uids.emplace(uid, right).second) {
        return Usage(absl::StrCat("--peer-uid: uid ", uid, " is mapped twice"));
      }
    } else if (a == "--peer-key" && SplitMapping(v, &left, &right)) {
      auto key = gantry::ReadCurvePublicKeyFile(left);
      if (!key.ok()) return Usage(absl::StrCat("--peer-key: ", key.status().ToString()));
      if (!service_options.peer_keys.emplace(*key, right).second) {
        return Usage(absl::StrCat("--peer-key: the key in ", left, " is mapped twice"));
      }
    } else if (a == "--curve-endpoint") {
      service_options.curve_endpoint = v;
    } else if (a == "--curve-secret-key") {
      auto key = gantry::ReadCurveSecretKeyFile(v);
      if (!key.ok()) return Usage(absl::StrCat("--curve-secret-key: ", key.status().ToString()));
      service_options.curve_secret_z85 = *key;
    } else if (a == "--workspace-root") {
      char real[PATH_MAX];
      struct stat st;
      if (realpath(v.c_str(), real) == nullptr || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return Usage(absl::StrCat("--workspace-root ", v, ": not an existing directory"));
      }
      if (std::string(real) == "/") return Usage("--workspace-root /: a root must not be /");
      sandbox_options.workspace_roots.push_back(real);
    } else if (a == "--workers" && absl::SimpleAtoi(v, &n) && n > 0) {
      service_options.workers = n;
    } else if (a == "--queue" && absl::SimpleAtoi(v, &n) && n > 0) {
      service_options.queue_capacity = n;
    } else if (a == "--fallback-uid" && absl::SimpleAtoi(v, &n) && n > 0) {
      sandbox_options.fallback_uid = n;
    } else if (a == "--fallback-gid" && absl::SimpleAtoi(v, &n) && n > 0) {
      sandbox_options.fallback_gid = n;
    } else if (a == "--policy" && policy == nullptr) {
      auto loaded = gantry::policy::PolicyReloader::Create(v);
      if (!loaded.ok()) {
        std::fprintf(stderr, "gantry-sandbox: %s\n", loaded.status().ToString().c_str());
        return 1;
      }
      policy = *std::move(loaded);
    } else {
      return Usage(absl::StrCat("bad option ", a, " ", v));
    }
  }
  if (sandbox_options.workspace_roots.empty()) return Usage("--workspace-root is required");
  if (service_options.peer_uids.empty() && service_options.peer_keys.empty()) {
    return Usage("no --peer-uid or --peer-key: no caller would be admitted");
  }
  if (!service_options.curve_endpoint.empty() && service_options.curve_secret_z85.empty()) {
    return Usage("--curve-endpoint needs --curve-secret-key");
  }
  if (policy != nullptr) {
    // Without the watcher the policy loaded at start stays in force; say so and go on.
    if (auto status = policy->StartWatching(); !status.ok()) {
      gantry::Log(gantry::LogLevel::kWarning, "sandbox.policy_watch_failed",
                  {{"error", status.ToString()}});
    }
    (void)policy->InstallSighupHandler();
    gantry::policy::PolicyReloader* reloader = policy.get();
    sandbox_options.policy = [reloader] { return reloader->Current(); };
  }
  gantry::sandbox::Sandbox sandbox(sandbox_options);
  gantry::sandbox::ToolService service(sandbox, service_options);
  if (auto status = service.Start(); !status.ok()) {
    std::fprintf(stderr, "gantry-sandbox: %s\n", status.ToString().c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  service.Stop();
  gantry::Log(gantry::LogLevel::kInfo, "sandbox.stopped");
  return 0;
}
