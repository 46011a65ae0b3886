// gantry: the one command line of the project. See common/subcommand.h.
#include <string>
#include <vector>

#include "cli/builtin_commands.h"
#include "cli/keys_commands.h"
#include "common/subcommand.h"
#include "formats/bundle/bundle_commands.h"
#include "harness-svc/task_commands.h"
#include "ledger/ledger_commands.h"
#include "sandbox-svc/sandbox_commands.h"
#include "worker/model/generate_command.h"
#include "policy/policy_commands.h"
#include "tokenizer-svc/tokenizer/tokenizer_commands.h"
#include "tokenizer-svc/jinja/render_command.h"

int main(int argc, char** argv) {
  using gantry::Subcommand;
  // Each capability adds its row here as it lands (tokenize, render, bundle, generate,
  // policy, sandbox, ledger, task, up).
  const std::vector<Subcommand> table = {
      gantry::cli::kVersionCommand,
      gantry::cli::kErrorsCommand,
      gantry::cli::kKeysCommand,
      gantry::ledger::kLedgerCommand,
      gantry::sandbox::kSandboxCommand,
      gantry::bundle::kBundleCommand,
      gantry::model::kGenerateCommand,
      gantry::policy::kPolicyCommand,
      gantry::tokenizer::kTokenizeCommand,
      gantry::tokenizer::kDetokenizeCommand,
      gantry::jinja::kRenderCommand,
      gantry::harness::kTaskCommand,
  };
  return gantry::DispatchSubcommand(table, std::vector<std::string>(argv + 1, argv + argc));
}
