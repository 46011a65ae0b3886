// Test-only: random, valid policies and requests, for the property tests and the
// benchmark. Every generated policy loads: bounds on one parameter always share a core
// range, so no combination of grants can be contradictory.
//
// "Served" policies and requests are for tests through a real router
// (tests/integration/explain_enforce_test.cc): requests stay within what the OpenAI API
// accepts, so that the router's HTTP parser takes every one to the policy.
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
  // Generated with PolicyGenOptions::served (RandomGrant reads it).
  bool served = false;

  // The whole file.
  std::string Render() const;
};

struct PolicyGenOptions {
  int deny_percent = 25;  // the chance that a grant carries an explicit deny
  // For a real router: defaults.advertised_tools strip, reject or left out; bounds on
  // enable_thinking; temperature and top_p bounds on a grid of 0.1 (which served
  // requests hit exactly); often no bounds on a model, and clamps more often than
  // rejects, so that more requests get to the tools; and budgets that are each unlimited
  // or 0, so that whether the router's budgets admit a request follows from the policy
  // alone, whatever ran before.
  bool served = false;
};

// `users` users named u0.., `groups` groups g0.., three models, and `grants` random
// grants on random subjects, each with an explicit deny with `deny_percent` chance.
GeneratedPolicy GeneratePolicy(int users, int groups, int grants, std::mt19937_64& rng,
                               int deny_percent = 25);
GeneratedPolicy GeneratePolicy(int users, int groups, int grants, std::mt19937_64& rng,
                               const PolicyGenOptions& options);

// A random grant for `subject_line` ("user: u3" or "group: g1").
std::string RandomGrant(const GeneratedPolicy& policy, const std::string& subject_line,
                        std::mt19937_64& rng, int deny_percent = 25);

// A random request by a random user (by name, or by key when `by_key`).
PolicyRequest RandomRequest(const GeneratedPolicy& policy, bool by_key, std::mt19937_64& rng);

// A tool call as a model emits it: the name and the arguments' JSON text.
struct ModelToolCall {
  std::string name;
  std::string arguments_json;
};

// A chat request as a client sends it to the router, and the tool calls the model will
// emit in its answer.
struct ServedRequest {
  // By key (sometimes one no principal has); model m0-m2 or the undeclared m9; the
  // parameters within the API's domains (max_tokens >= 1, temperature <= 2, top_p <= 1;
  // temperature and top_p on the grid of 0.1); offered tools, duplicate-free, granted
  // or not, confusable names (Read_File) among them; a tool_choice only with offered
  // tools, a named one naming one of them; sometimes chat_template_kwargs
  // enable_thinking, or another key. No tool calls, no commands.
  PolicyRequest request;
  // 0-2 calls, with well-formed and bad arguments: a path with "..", arguments that are
  // not an object or not JSON, a repeated key, a non-string path, no path.
  std::vector<ModelToolCall> model_calls;
};

ServedRequest RandomServedRequest(const GeneratedPolicy& policy, std::mt19937_64& rng);

}  // namespace gantry::policy

#endif  // GANTRY_POLICY_POLICY_GEN_H_
