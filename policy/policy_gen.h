// Test-only: random, valid policies and requests, for the property test and the
// benchmark. Every generated policy loads: bounds on one parameter always share a core
// range, so no combination of grants can be contradictory.
//
// Thread-safety: pure functions of their arguments (the RNG is the caller's).
#ifndef GANTRY_POLICY_POLICY_GEN_H_
#define GANTRY_POLICY_POLICY_GEN_H_

#include <random>
#include <string>
#include <vector>

#include "policy/policy_types.h"

namespace gantry::policy {

struct GeneratedPolicy {
  std::string head;                 // version, defaults, models, principals
  std::vector<std::string> grants;  // each a YAML sequence item ("  - user: u1\n...")
  std::vector<std::string> users;   // user names; the key of user u is "key-" + u
  std::vector<std::vector<std::string>> user_groups;
  std::vector<std::string> groups;
  std::vector<std::string> models;

  // The whole file.
  std::string Render() const;
};

// `users` users named u0.., `groups` groups g0.., three models, and `grants` random
// grants on random subjects, each with an explicit deny with `deny_percent` chance.
GeneratedPolicy GeneratePolicy(int users, int groups, int grants, std::mt19937_64& rng,
                               int deny_percent = 25);

// A random grant for `subject_line` ("user: u3" or "group: g1").
std::string RandomGrant(const GeneratedPolicy& policy, const std::string& subject_line,
                        std::mt19937_64& rng, int deny_percent = 25);

// A random request by a random user (by name, or by key when `by_key`).
PolicyRequest RandomRequest(const GeneratedPolicy& policy, bool by_key, std::mt19937_64& rng);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_GEN_H_
