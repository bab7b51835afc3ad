// conform anatomy: parameters, FLOPs, bytes and arithmetic intensity of one
// forward, op by op, for a decode step and a prefill — counted from the
// configuration (harness/config/anatomy.h says how), nothing run. Flags →
// the table or conform-anatomy/1 (harness/report/anatomy.h), or the page
// (report/anatomy_html.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "config/options.h"
#include "core/case.h"
#include "report/anatomy.h"
#include "report/report.h"

namespace conform::cli {

namespace {

struct AnatomyOptions {
    config::ConfigOptions config;
    int64_t tokens = 512;
    int64_t context = 0;
    std::string dtype = "f16";
    bool json = false;
    std::string html;  // --html FILE
    bool force = false;  // --force: --html may replace an existing file
    CLI::Option* o_html = nullptr;
    bool with_ceilings = false;
};

int run_anatomy(const AnatomyOptions& o) {
    auto usage = [](const std::string& msg) {
        std::cerr << "conform anatomy: " << msg << "\n";
        return int(kUsage);
    };
    std::string problem;
    const std::optional<config::ModelConfig> resolved = config::resolve_model(o.config, &problem);
    if (!resolved) return usage(problem);
    if (o.tokens < 1) return usage("--tokens: expected a positive count, found " + std::to_string(o.tokens));
    if (o.context < 0) return usage("--context: expected a count >= 0, found " + std::to_string(o.context));
    const auto dt = parse_dtype(o.dtype);
    if (!dt) return usage("--dtype: expected f16, bf16 or f32, found '" + o.dtype + "'");
    const bool html = o.o_html && o.o_html->count();
    if (html)
        if (const std::string bad = report::html_target_problem(o.html, o.force); !bad.empty()) return usage("--html: " + bad);

    report::AnatomyPage page;
    page.model = *resolved;
    page.tokens = o.tokens;
    page.context = o.context;
    page.dtype = to_string(*dt);
    page.ridge = o.with_ceilings ? report::measure_ridge() : report::assumed_ridge();
    if (html) {
        const std::string text = report::render_anatomy_html(page);
        try {
            write_file_atomic(o.html, text);
        } catch (const std::exception& e) {
            return usage(std::string("--html: ") + e.what());
        }
        (o.json ? std::cerr : std::cout) << fmt::format("conform anatomy: wrote {} ({} bytes; ridge {:.1f} FLOP/B, {})\n",
                                                        o.html, text.size(), page.ridge.flops_per_byte,
                                                        page.ridge.measured ? "measured" : "assumed");
        if (!o.json) return kConform;
    }
    if (o.json)
        std::cout << report::anatomy_json(page).dump(2) << "\n";
    else
        std::cout << report::anatomy_table(page);
    return kConform;
}

}  // namespace

Command add_anatomy(CLI::App& app) {
    auto o = std::make_shared<AnatomyOptions>();
    CLI::App* sub = app.add_subcommand(
        "anatomy", "parameters, FLOPs, bytes and arithmetic intensity per op, layer and model; KV cache per token");
    config::add_config_options(*sub, o->config);
    sub->add_option("--tokens", o->tokens, "prefill length T (default 512)");
    sub->add_option("--context", o->context, "decode: tokens already in the KV cache (default 0)");
    sub->add_option("--dtype", o->dtype, "bytes per element of weights, activations, KV cache: f16 | bf16 | f32 (default f16)");
    sub->add_flag("--json", o->json, "print the numbers as JSON (schema conform-anatomy/1)");
    o->o_html = sub->add_option("--html", o->html,
                                "write the numbers as one self-contained page to play with (controls for the "
                                "configuration, T, context, dtype), instead of the table");
    sub->add_flag("--force", o->force, "let --html replace an existing file");
    sub->add_flag("--with-ceilings", o->with_ceilings,
                  "measure this machine's copy bandwidth and matmul rate (as bench does) for the ridge point; "
                  "default: an H100-like 295 FLOP/B, stated as assumed");
    return {sub, [o] { return run_anatomy(*o); }};
}

}  // namespace conform::cli
