// conform forward: flags → run::ForwardRequest (the model resolved, a
// checkpoint opened, the implementations made) → run::run_forward
// (harness/run/forward.h) → the table or conform-forward/1.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/gate.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "registry.h"
#include "run/forward.h"
#include "run/real.h"
#include "weights/checkpoint.h"

namespace conform::cli {

namespace {

struct ForwardOptions {
    config::ConfigOptions config;
    int64_t tokens = 8, vocab = 512, start = 0, scale_down = 1;
    uint64_t seed = 1;
    std::string impls, dtype = "f32";
    bool json = false;
    std::string tokens_arg = "8";                     // --tokens: a count, or (--weights) the ids
    std::string weights, save_logits, expect_logits;  // a real checkpoint; where the logits go; what they must be
    double logits_tol = 1e-3;
    int64_t token_count = 8;
    bool force = false;
    CLI::Option* o_tokens = nullptr;
    CLI::Option* o_token_count = nullptr;
};

int run_forward(const ForwardOptions& o) {
    auto usage = [](const std::string& msg) {
        std::cerr << "conform forward: " << msg << "\n";
        return int(kUsage);
    };
    // A real checkpoint: its configuration, layers, embedding, final norm and
    // LM head; the token ids given or a fixed random sequence of --tokens.
    std::shared_ptr<run::RealModel> real;
    std::optional<config::ModelConfig> resolved;
    int64_t n_tokens = 0;
    const bool ids_given = o.tokens_arg.find(',') != std::string::npos ||
                           (!o.weights.empty() && o.o_tokens->count() && !o.o_token_count->count());
    // Before any work: an output that exists is refused now, not after the forward.
    std::error_code ec;
    if (!o.save_logits.empty() && !o.force && std::filesystem::exists(o.save_logits, ec))
        return usage(o.save_logits + ": exists (use --force to overwrite)");
    if (o.o_tokens->count() && o.o_token_count->count())
        return usage("--tokens and --token-count: give the ids or their count, not both");
    if (!o.weights.empty()) {
        if (o.scale_down != 1) return usage("--scale-down: --weights fixes the sizes");
        run::RealOptions ro;
        ro.path = o.weights;
        ro.layers = "all";
        ro.model_inputs = true;
        ro.n_tokens = o.token_count;
        ro.start = o.start;
        ro.overrides = o.config;
        try {
            if (ids_given) ro.tokens = run::parse_token_ids(o.tokens_arg, "--tokens");
            real = run::RealModel::open(ro, nullptr);
        } catch (const InputError& e) {
            return usage(e.what());
        }
        resolved = real->model();
    } else {
        if (ids_given) return usage("--tokens: token ids only with --weights PATH (a random model draws its own)");
        try {
            size_t used = 0;
            n_tokens = std::stoll(o.tokens_arg, &used);
            if (used != o.tokens_arg.size()) throw std::invalid_argument("");
        } catch (const std::exception&) {
            return usage("--tokens: expected a count, found '" + o.tokens_arg + "'");
        }
        std::string problem;
        resolved = config::resolve_model(o.config, &problem);
        if (!resolved) return usage(problem);
    }
    const config::ModelConfig& m = *resolved;
    if (!real && n_tokens < 1) return usage("--tokens: expected a positive count, found " + std::to_string(n_tokens));
    if (real && o.token_count < 1)
        return usage("--token-count: expected a positive count, found " + std::to_string(o.token_count));
    if (o.vocab < 1) return usage("--vocab: expected a positive count, found " + std::to_string(o.vocab));
    if (o.start < 0) return usage("--positions: expected a position >= 0, found " + std::to_string(o.start));
    if (o.scale_down < 1) return usage("--scale-down: expected K >= 1, found " + std::to_string(o.scale_down));
    const auto dt = parse_dtype(o.dtype);
    if (!dt) return usage("--dtype: expected f32, bf16 or f16, found '" + o.dtype + "'");

    run::ForwardRequest q;
    model::Spec& s = q.spec;
    s.block = config::scale_down(m.block, o.scale_down);
    s.layers = m.layers;
    s.tokens = real ? static_cast<int64_t>(real->tokens().size()) : n_tokens;
    s.vocab = real ? m.vocab : o.vocab;
    s.start = o.start;
    s.seed = o.seed;
    const BlockConfig& c = s.block;

    // ---- implementations ---------------------------------------------------------
    std::vector<std::string> names = split_list(o.impls);
    if (names.empty())
        for (const auto& e : implementations()) names.push_back(e.name);
    std::ostream& log = o.json ? std::cerr : std::cout;
    for (const auto& n : names) {
        const ImplEntry* e = find_implementation(n);
        if (!e) return usage("--impl: unknown implementation '" + n + "' (see `conform list`)");
        const Availability a = e->available();
        if (!a.available) {
            if (!o.impls.empty()) {
                std::cerr << "conform forward: implementation '" << n
                          << "' is unavailable on this machine: " << a.reason << "\n";
                return kUnavailable;
            }
            log << "skipping " << n << ": " << a.reason << "\n";
            continue;
        }
        ImplOptions io;
        io.dtype = *dt;
        std::unique_ptr<Implementation> made;
        try {
            made = e->create(io);
        } catch (const std::exception& ex) {  // e.g. a dtype it does not run
            if (!o.impls.empty()) {
                std::cerr << "conform forward: implementation '" << n << "' cannot run: " << ex.what() << "\n";
                return kUnavailable;
            }
            log << "skipping " << n << ": " << ex.what() << "\n";
            continue;
        }
        const Support sup = made->supports(Op::block, c);
        if (!sup.ok) {
            log << "skipping " << n << ": " << sup.reason << "\n";
            continue;
        }
        q.impls.emplace_back(n, std::move(made));
    }

    if (!o.json && real) {
        std::cout << "conform forward\n";
        for (const auto& l : real->checkpoint().detected()) std::cout << "  " << l << "\n";
        config::print_config(std::cout, m);
        std::cout << fmt::format("  model: {} layers, vocab {} ({}), T = {} tokens at positions {}..{}\n", s.layers,
                                 s.vocab, o.weights, s.tokens, s.start, s.start + s.tokens - 1);
    } else if (!o.json) {
        std::cout << "conform forward\n";
        config::print_config(std::cout, m);
        std::cout << fmt::format(
            "  model: {} layers, vocab {} (random, seed {}), T = {} tokens at positions {}..{}{}\n", s.layers, s.vocab,
            s.seed, s.tokens, s.start, s.start + s.tokens - 1,
            o.scale_down > 1 ? fmt::format(", d_model and ffn / {} = {}, {}", o.scale_down, c.d_model, c.ffn_dim) : "");
        std::cout << "  weights: std 1/sqrt(fan_in); wo and w2 also / sqrt(2L); norm weights 1 + N(0, 0.01)\n";
    }
    q.model = m;
    q.real = real;
    q.weights = o.weights;
    q.scale_down = o.scale_down;
    q.dtype = *dt;
    q.expect_logits = o.expect_logits;
    q.logits_tol = o.logits_tol;
    q.save_logits = o.save_logits;
    q.force = o.force;
    run::ForwardResult f;
    try {
        f = run::run_forward(q, log);
    } catch (const InputError& e) {
        return usage(e.what());
    } catch (const weights::WeightsError& e) {  // a tensor the checkpoint cannot give (non-finite, unreadable)
        return usage(e.what());
    }
    if (o.json)
        std::cout << run::forward_json(q, f).dump(2) << "\n";
    else
        std::cout << run::forward_table(q, f);
    return f.pass() ? kConform : kNonconformance;
}

}  // namespace

Command add_forward(CLI::App& app) {
    auto o = std::make_shared<ForwardOptions>();
    CLI::App* sub = app.add_subcommand(
        "forward",
        "one forward of a model (embedding, L blocks, final norm, LM head), random or --weights: the "
        "residual stream after every sub-layer and each implementation's error there");
    config::add_config_options(*sub, o->config);
    sub->add_option("--weights", o->weights,
                    "a checkpoint (HF safetensors directory or file, GGUF) instead of a random model: its layers, "
                    "embedding, final norm and LM head");
    o->o_token_count = sub->add_option("--token-count", o->token_count,
                                       "with --weights and no --tokens: that many ids drawn from the vocabulary with a "
                                       "fixed seed (default 8)")
                           ->check(CLI::PositiveNumber);
    sub->add_option("--expect-logits", o->expect_logits,
                    "FILE.h5: the logits the model must give (datasets token_ids, positions, logits or reference; "
                    "fixtures/SCHEMA.md): exit 1 when the reference's differ by more than --logits-tol, with the "
                    "convention change that explains them");
    sub->add_option("--logits-tol", o->logits_tol,
                    "relative error (max |diff| / max |expected|) --expect-logits allows (default 1e-3)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--save-logits", o->save_logits,
                    "write FILE.h5: token ids, positions, the reference's logits and each implementation's "
                    "(fixtures/SCHEMA.md, \"Logits files\")");
    sub->add_flag("--force", o->force, "let --save-logits overwrite an existing file");
    o->o_tokens =
        sub->add_option("--tokens", o->tokens_arg,
                        "T: tokens in the forward (default 8); with --weights: the token ids, comma-separated");
    sub->add_option("--impl", o->impls, "implementations, comma-separated (default: every available one)");
    sub->add_option("--vocab", o->vocab,
                    "vocabulary of the random model (default 512; the real one only widens the LM head)");
    sub->add_option("--positions", o->start, "position of the first token (default 0)");
    sub->add_option("--seed", o->seed, "seed of the weights and tokens (default 1)");
    sub->add_option("--scale-down", o->scale_down,
                    "divide d_model and ffn by K (heads, head_dim, conventions and depth kept; default 1)");
    sub->add_option("--dtype", o->dtype, "dtype the implementations run in: f32, bf16, f16 (default f32)");
    sub->add_flag("--json", o->json, "print the table as JSON (schema conform-forward/1)");
    return {sub, [o] { return run_forward(*o); }};
}

}  // namespace conform::cli
