// `gantry task run FILE` and `gantry task show ID` (docs/tasks.md, "Command line").
//
// Thread-safety: not applicable (command-line entry points).
#ifndef GANTRY_HARNESS_SVC_TASK_COMMANDS_H_
#define GANTRY_HARNESS_SVC_TASK_COMMANDS_H_

#include <string>
#include <vector>

#include "common/json.h"
#include "common/subcommand.h"

namespace gantry::harness {

int RunTaskCommand(const std::vector<std::string>& args);

// One line describing an event for the live progress and `task show`.
std::string SummarizeEvent(const std::string& type, const json::Value& payload);

inline const Subcommand kTaskCommand = {
    "task",
    "run an agent task from a manifest; show a task's event trace",
    "Usage: gantry task run FILE [--router URL] [--sandbox ENDPOINT] [--ledger URL]\n"
    "                            [--sandbox-key FILE --sandbox-server-key FILE]\n"
    "                            [--key KEY] [--spool-dir DIR] [--quiet]\n"
    "       gantry task show ID [--ledger URL]\n"
    "\n"
    "  run    runs the task of manifest FILE (docs/tasks.md) to its end, printing one line\n"
    "         per event as it is recorded in the ledger (stream = the task id), then the\n"
    "         answer and the acceptance results.\n"
    "           --router URL        the router (default http://127.0.0.1:8080)\n"
    "           --sandbox ENDPOINT  the sandbox service (default its Unix socket,\n"
    "                               ipc:///run/gantry/sandbox.sock; it admits this\n"
    "                               process by its uid), or tcp://HOST:PORT with CURVE:\n"
    "           --sandbox-key FILE  this harness's CURVE secret key (gantry keys gen-curve)\n"
    "           --sandbox-server-key FILE  the sandbox service's CURVE public key\n"
    "           --key KEY           the harness's API key (default $GANTRY_HARNESS_KEY)\n"
    "           --ledger URL        libpq URL (default $GANTRY_LEDGER_URL, else the cluster\n"
    "                               of deploy/up)\n"
    "           --spool-dir DIR     the ledger spool (default $GANTRY_HOME/spool/harness)\n"
    "  show   prints the event trace of task ID from the ledger and checks its chain.\n"
    "\n"
    "Exit status: run: 0 when the task completed and its acceptance holds, 1 for any\n"
    "other ending (budget, denials, turns, errors); show: 0, or 1 when the task is\n"
    "unknown or its chain is broken; 2 usage error.\n",
    RunTaskCommand,
};

}  // namespace gantry::harness

#endif  // GANTRY_HARNESS_SVC_TASK_COMMANDS_H_
