// Fuzz target: the policy loader (an admin's YAML, but bytes from a file all the same).
// Invariants: loading never crashes or throws, whatever the bytes; a policy that loads
// decides a few requests without crashing, and loading the same text again gives the
// same hash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "policy/policy_decide.h"
#include "policy/policy_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto snap = gantry::policy::LoadPolicyText(text, "fuzz.yaml");
  if (!snap.ok()) return 0;
  auto again = gantry::policy::LoadPolicyText(text, "fuzz.yaml");
  if (!again.ok() || (*again)->sha256 != (*snap)->sha256) std::abort();
  for (const gantry::policy::Principal& p : (*snap)->principals) {
    gantry::policy::PolicyRequest r;
    r.principal = p.name;
    for (const auto& [model, info] : (*snap)->models) {
      r.model = model;
      r.params.Set(gantry::policy::Param::kMaxTokens, 1e9);
      r.params.Set(gantry::policy::Param::kTemperature, 7);
      r.tools.push_back({"read_file", {{"path", "/workspace/a"}}});
      r.commands.push_back({"/usr/bin/git", "status"});
      (void)gantry::policy::Decide(**snap, r);
    }
  }
  return 0;
}
