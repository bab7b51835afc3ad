// conform list: implementations (available or why not) and ops.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/gate.h"
#include "plugin/loader.h"
#include "registry.h"

namespace conform::cli {

Command add_list(CLI::App& app) {
    struct Opts {
        bool ops = false, impls = false;
        std::vector<std::string> libs;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand("list", "implementations (available or why not) and ops");
    sub->add_flag("--ops", o->ops, "only op names, one per line");
    sub->add_flag("--impls", o->impls, "only implementation names, one per line");
    sub->add_option("--impl-lib", o->libs, "also list the implementations in these plugin libraries")
        ->allow_extra_args(false);
    return {sub, [o] {
                if (!o->impls) {
                    if (!o->ops) std::cout << "ops:\n";
                    for (Op op : kAllOps) std::cout << (o->ops ? "" : "  ") << to_string(op) << "\n";
                }
                if (o->ops) return int(kConform);
                std::vector<plugin::Plugin> plugins;
                try {
                    plugins = plugin::load_plugins(o->libs);
                } catch (const plugin::PluginError& e) {
                    std::cerr << "conform: --impl-lib " << e.what() << "\n";
                    return int(kUsage);
                }
                if (!o->impls) std::cout << "implementations:\n";
                for (const auto& e : implementations()) {
                    const Availability a = e.available();
                    if (o->impls)
                        std::cout << e.name << "\n";
                    else
                        std::cout << "  " << e.name << "  " << (a.available ? "available" : "unavailable: " + a.reason)
                                  << "  - " << e.description << "\n";
                    if (!o->impls && a.available && e.details) std::cout << "      " << e.details() << "\n";
                }
                if (!o->impls && !plugins.empty()) std::cout << "plugins (--impl-lib):\n";
                for (const auto& p : plugins)
                    std::cout << (o->impls ? "" : "  ") << p.entry.name
                              << (o->impls ? "" : "  available  - " + p.entry.description) << "\n";
                if (!o->impls && !mutant_implementations().empty()) {
                    std::cout << "mutants (never in the default gate; see `conform mutants`):\n";
                    for (const auto& e : mutant_implementations())
                        std::cout << "  " << e.name << "  - " << e.description << "\n";
                }
                return int(kConform);
            }};
}

}  // namespace conform::cli
