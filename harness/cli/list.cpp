// conform list: implementations (available or why not) and ops.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "run/plan.h"
#include "registry.h"
#include "report/twists.h"

namespace conform::cli {

Command add_list(CLI::App& app) {
    struct Opts {
        bool ops = false, impls = false, twists = false, json = false, markdown = false;
        WorkerFlags workers;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand("list", "implementations (available or why not) and ops");
    sub->add_flag("--ops", o->ops, "only op names, one per line");
    sub->add_flag("--impls", o->impls, "only implementation names, one per line");
    sub->add_flag("--twists", o->twists, "the twists (conform/twists.h): name, kind, flag, id, ops");
    sub->add_flag("--json", o->json, "with --twists: every fact of each twist as JSON (what tools read)");
    sub->add_flag("--markdown", o->markdown, "with --twists: docs/twists.md");
    add_worker_flags(*sub, o->workers, false);
    return {sub, [o] {
                if (o->twists) {
                    std::cout << (o->json       ? report::twists_json().dump(2) + "\n"
                                  : o->markdown ? report::twists_markdown()
                                                : report::twists_table());
                    return int(kConform);
                }
                if (o->json || o->markdown) {
                    std::cerr << "conform list: --json and --markdown go with --twists\n";
                    return int(kUsage);
                }
                if (!o->impls) {
                    if (!o->ops) std::cout << "ops:\n";
                    for (Op op : kAllOps) std::cout << (o->ops ? "" : "  ") << to_string(op) << "\n";
                }
                if (o->ops) return int(kConform);
                // Asked in their own worker processes (never loaded here): their hello.
                run::ImplRequest r;
                apply_worker_flags(o->workers, r);
                run::ImplSet workers;
                if (r.has_workers()) workers = run::choose_implementations(r);
                if (!o->impls) std::cout << "implementations:\n";
                for (const auto& e : implementations()) {
                    const Availability a = e.available();
                    if (o->impls)
                        std::cout << e.name << "\n";
                    else
                        std::cout << "  " << e.name << "  " << (a.available ? "available" : "unavailable: " + a.reason)
                                  << "  - " << e.description << (e.by_name ? " (only when --impl names it)" : "")
                                  << "\n";
                    if (!o->impls && a.available && e.details) std::cout << "      " << e.details() << "\n";
                }
                if (!o->impls && !workers.impls.empty()) std::cout << "workers (--impl-lib, --impl-cmd):\n";
                for (const auto& c : workers.impls) {
                    const worker::Hello& h = c.worker->hello();
                    std::string ops, dtypes;
                    for (Op op : h.ops) ops += (ops.empty() ? "" : ", ") + std::string(to_string(op));
                    for (DType d : h.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + std::string(to_string(d));
                    std::cout << (o->impls ? "" : "  ") << h.name
                              << (o->impls ? "" : "  available  - " + c.worker->spec().flag() +
                                                      (h.description.empty() ? "" : ": " + h.description) +
                                                      " (ops: " + ops + "; dtypes: " + dtypes + ")")
                              << "\n";
                }
                if (!o->impls && !mutant_implementations().empty()) {
                    std::cout << "mutants (never in the default gate; see `conform mutants`):\n";
                    for (const auto& e : mutant_implementations())
                        std::cout << "  " << e.name << "  - " << e.description << "\n";
                }
                return int(kConform);
            }};
}

}  // namespace conform::cli
