// harness/cli/gate.h — the main job, `conform [flags]`: its flags on the root
// app. The work is in harness/run (gate.h: plan, run, report); this file only
// declares the flags and turns the verdict into an exit code.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "run/gate.h"

namespace conform::cli {

using run::GateOptions;

// The gate's flags on the root app.
void add_gate_flags(CLI::App& app, GateOptions& g);

int run_gate(const GateOptions& g);

}  // namespace conform::cli
