// conform — the command. Parsing and wiring only; the work is in the libraries.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <iostream>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/hf_config.h"
#include "worker/process.h"
#include "reference/blas.h"
#include "reference/reference.h"

using namespace conform;
using namespace conform::cli;

int main(int argc, char** argv) {
    // The child select_core() starts to try an OpenBLAS core answers and exits here.
    ref::blas::serve_probe_if_asked();
    // Before anything else, and before any worker exists: a non-dumpable judge
    // cannot be read, written or traced by a process of its own uid that lacks
    // CAP_SYS_PTRACE (a worker: /proc/PID/mem, /proc/PID/fd, ptrace), and a
    // dead worker's pipe is an error to report, not a SIGPIPE to die of.
    worker::protect_judge();
    // A full-size case allocates and frees tensors of hundreds of MB, each of
    // which glibc would otherwise map fresh and the kernel zero page by page
    // (half of such a case's time); kept in the heap, they are reused.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    ref::set_threads();
    CLI::App app{"conform — differential conformance testing of Llama-family decoder blocks against a LibTorch reference"};
    app.require_subcommand(0, 1);
    GateOptions g;
    add_gate_flags(app, g);

    // Subcommands, in the order `conform --help` lists them.
    std::vector<Command> commands = {
        add_list(app),
        add_generate(app),
        add_mutants(app),
        add_bench(app),
        add_coverage(app),
        add_merge_reports(app),
        add_forward(app),
        add_anatomy(app),
        add_detection_floor(app),
    };
    // --blas-core: on the gate and every command that runs the reference or torch.
    std::string blas_core;
    add_blas_core_flag(app, blas_core);
    for (const auto& c : commands)
        if (c.app->get_name() != "list" && c.app->get_name() != "merge-reports") add_blas_core_flag(*c.app, blas_core);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kConform : kUsage;
    }

    // Every command reports a bad input by throwing: one line, exit 2 (3 for
    // an implementation this machine cannot run); anything else is ours.
    try {
        // The BLAS the reference and torch run on is chosen before any work
        // (this may execute conform again, with OPENBLAS_CORETYPE set); the
        // commands that never multiply matrices skip it.
        const bool multiplies = !app.got_subcommand("list") && !app.got_subcommand("merge-reports");
        if (multiplies) {
            const ref::blas::Choice& blas = ref::blas::select_core(blas_core, argv);
            if (blas.changed && !app.got_subcommand("bench")) std::cerr << "conform: " << blas.line << "\n";
        }
        for (const auto& c : commands)
            if (c.app->parsed()) return c.run();
        return run_gate(g);
    } catch (const std::invalid_argument& e) {  // --blas-core
        std::cerr << "conform: " << e.what() << "\n";
        return kUsage;
    } catch (const InputError& e) {
        std::cerr << "conform: " << e.what() << "\n";
        return kUsage;
    } catch (const config::ConfigError& e) {
        std::cerr << "conform: " << e.what() << "\n";
        return kUsage;
    } catch (const run::UnavailableError& e) {
        std::cerr << "conform: " << e.what() << "\n";
        return kUnavailable;
    } catch (const std::exception& e) {
        std::cerr << "conform: internal error (a bug in conform, please report it with the command line): " << e.what()
                  << "\n";
        return kInternal;
    }
}
