// harness/cli/commands.h — the subcommands, listed explicitly in main.cpp.
//
// Each subcommand lives in its own file and exposes one function that adds
// itself to the app and returns how to run it once parsed. main.cpp calls
// them in a fixed list (no static registration).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace conform::cli {

// Exit codes, the same for every command. kInternal: conform's own bug (a
// generated case that fails validation, an invariant broken), never the user's.
enum Exit { kConform = 0, kNonconformance = 1, kUsage = 2, kUnavailable = 3, kInternal = 70 };

struct Command {
    CLI::App* app = nullptr;   // the subcommand, to ask whether it was parsed
    std::function<int()> run;  // returns the exit code
};

Command add_list(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_mutants(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_coverage(CLI::App& app);       // coverage.cpp
Command add_merge_reports(CLI::App& app);  // merge.cpp
Command add_forward(CLI::App& app);        // forward.cpp
Command add_anatomy(CLI::App& app);        // anatomy.cpp
Command add_detection_floor(CLI::App& app);  // detection.cpp

}  // namespace conform::cli
