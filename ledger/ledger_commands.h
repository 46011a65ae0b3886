// `gantry ledger`: verify, export, tail, append.
#ifndef GANTRY_LEDGER_LEDGER_COMMANDS_H_
#define GANTRY_LEDGER_LEDGER_COMMANDS_H_

#include "common/subcommand.h"

namespace gantry::ledger {

extern const Subcommand kLedgerCommand;

}  // namespace gantry::ledger

#endif  // GANTRY_LEDGER_LEDGER_COMMANDS_H_
