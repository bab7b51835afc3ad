// conform merge-reports: flags → report::merge_reports (harness/report/merge.h
// says what makes reports the shards of one run) → the merged report written
// and summarised. Exit 2 when they are not; else the merged run's verdict.
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "report/formats.h"
#include "report/merge.h"

namespace conform::cli {

namespace {

using nlohmann::json;

struct Opts {
    std::vector<std::string> inputs;
    std::string out = "reports";
    std::string formats = "json";
    bool quiet = false;
};

int run(const Opts& o) {
    namespace fs = std::filesystem;
    std::string why;
    const auto formats = parse_report_formats(o.formats, &why);
    if (!formats) {
        std::cerr << "conform: merge-reports: --report: " << why << "\n";
        return kUsage;
    }
    if (const std::string p = out_dir_problem(o.out); !p.empty()) {
        std::cerr << "conform: merge-reports: --out " << p << "\n";
        return kUsage;
    }
    // Never write over what is being merged.
    for (const auto& f : *formats) {
        const std::string target = report_path(o.out, f);
        for (const auto& in : o.inputs) {
            std::error_code ec;
            if (fs::exists(target, ec) && fs::equivalent(target, in, ec)) {
                std::cerr << "conform: merge-reports: " << target << " is one of the inputs; choose another --out\n";
                return kUsage;
            }
        }
    }

    json merged;
    try {
        merged = report::merge_reports(o.inputs);
    } catch (const report::MergeError& e) {
        std::cerr << "conform: merge-reports: " << e.what() << "\n";
        return kUsage;
    }
    std::vector<std::string> written;
    try {
        written = write_reports(merged, *formats, o.out);
    } catch (const std::exception& e) {
        std::cerr << "conform: merge-reports: cannot write report: " << e.what() << "\n";
        return kUsage;
    }
    if (!o.quiet) {
        std::cout << report::merge_summary(merged);
        for (const auto& w : written) std::cout << "report: " << w << "\n";
    }
    return merged.value("pass", false) ? kConform : kNonconformance;
}

}  // namespace

Command add_merge_reports(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    CLI::App* sub =
        app.add_subcommand("merge-reports",
                           "join the JSON reports of a sharded run (--shard i/n) into one report; exit 0 if the merged run "
                           "passes (every case conforms, nothing left unrun or tampered), 1 if not, 2 if the reports are not the shards of one run");
    sub->add_option("reports", o->inputs, "the shards' conform.json files")->required()->check(CLI::ExistingFile);
    sub->add_option("--out", o->out, "directory for the merged report (default reports/); never one of the inputs");
    sub->add_option("--report", o->formats, "formats to write: json,junit,md,html or all (default json)");
    sub->add_flag("--quiet", o->quiet, "print nothing but errors");
    return {sub, [o] { return run(*o); }};
}

}  // namespace conform::cli
