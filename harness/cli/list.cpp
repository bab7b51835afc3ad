// conform list: implementations (available or why not) and ops.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/gate.h"
#include "registry.h"

namespace conform::cli {

Command add_list(CLI::App& app) {
    struct Opts {
        bool ops = false, impls = false;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand("list", "implementations (available or why not) and ops");
    sub->add_flag("--ops", o->ops, "only op names, one per line");
    sub->add_flag("--impls", o->impls, "only implementation names, one per line");
    return {sub, [o] {
                if (!o->impls) {
                    if (!o->ops) std::cout << "ops:\n";
                    for (Op op : kAllOps) std::cout << (o->ops ? "" : "  ") << to_string(op) << "\n";
                }
                if (o->ops) return int(kConform);
                if (!o->impls) std::cout << "implementations:\n";
                for (const auto& e : implementations()) {
                    const Availability a = e.available();
                    if (o->impls)
                        std::cout << e.name << "\n";
                    else
                        std::cout << "  " << e.name << "  " << (a.available ? "available" : "unavailable: " + a.reason)
                                  << "  - " << e.description << "\n";
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
