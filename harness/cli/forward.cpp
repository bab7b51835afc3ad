// conform forward: flags → run::resolve_forward (the model resolved, a
// checkpoint opened, the implementations made) → run::run_forward
// (harness/run/forward.h) → the table or conform-forward/1.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/case.h"
#include "run/forward.h"
#include "run/hidden.h"
#include "run/plan.h"
#include "weights/error.h"

namespace conform::cli {

namespace {

struct ForwardOptions {
    run::ForwardFlags f;
    std::string expect_hidden;
    double hidden_tol = 1e-3;
    CLI::Option* o_hidden_tol = nullptr;
    CLI::Option* o_tokens = nullptr;
    CLI::Option* o_token_count = nullptr;
};

int usage(const std::string& msg) {
    std::cerr << "conform forward: " << msg << "\n";
    return int(kUsage);
}

// --expect-hidden: the checkpoint's attention sub-layers on the file's own stream (run/hidden.h);
// the reference alone, from the file's token ids.
int run_hidden(const ForwardOptions& o) {
    if (o.f.weights.empty()) return usage("--expect-hidden: needs --weights (the checkpoint whose layers the file ran)");
    for (const auto& [given, flag] : {std::pair{!o.f.expect_logits.empty(), "--expect-logits"},
                                      {!o.f.save_logits.empty(), "--save-logits"}, {!o.f.impls.empty(), "--impl"},
                                      {o.o_tokens->count() > 0, "--tokens"}, {o.o_token_count->count() > 0, "--token-count"},
                                      {o.f.json, "--json"}})
        if (given)
            return usage(std::string(flag) + ": not with --expect-hidden (it checks the reference's attention on the "
                                             "file's own token ids and stream)");
    run::HiddenFlags h{o.f.weights, o.expect_hidden, o.hidden_tol, o.f.config};
    try {
        const run::HiddenResult r = run::run_hidden_check(h, std::cerr);
        std::cout << run::hidden_table(r);
        return r.pass() ? kConform : kNonconformance;
    } catch (const InputError& e) {
        return usage(e.what());
    }
}

int run_forward(const ForwardOptions& o) {
    if (!o.expect_hidden.empty()) return run_hidden(o);
    if (o.o_hidden_tol->count()) return usage("--hidden-tol: only with --expect-hidden");
    run::ForwardFlags flags = o.f;
    flags.tokens_given = o.o_tokens->count() > 0;
    flags.token_count_given = o.o_token_count->count() > 0;
    std::ostream& log = flags.json ? std::cerr : std::cout;
    run::ForwardRequest q;
    try {
        q = run::resolve_forward(flags, log);
    } catch (const InputError& e) {
        return usage(e.what());
    } catch (const run::UnavailableError& e) {
        std::cerr << "conform forward: " << e.what() << "\n";
        return kUnavailable;
    }
    if (!flags.json) std::cout << run::forward_header(q);
    run::ForwardResult f;
    try {
        f = run::run_forward(q, log);
    } catch (const InputError& e) {
        return usage(e.what());
    } catch (const weights::WeightsError& e) {  // a tensor the checkpoint cannot give (non-finite, unreadable)
        return usage(e.what());
    }
    if (flags.json)
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
    config::add_config_options(*sub, o->f.config);
    sub->add_option("--weights", o->f.weights,
                    "a checkpoint (HF safetensors directory or file, GGUF) instead of a random model: its layers, "
                    "embedding, final norm and LM head");
    o->o_token_count = sub->add_option("--token-count", o->f.token_count,
                                       "with --weights and no --tokens: that many ids drawn from the vocabulary with a "
                                       "fixed seed (default 8)")
                           ->check(positive());
    sub->add_option("--expect-logits", o->f.expect_logits,
                    "FILE.h5: the logits the model must give (datasets token_ids, positions, logits or reference; "
                    "fixtures/SCHEMA.md): exit 1 when the reference's differ by more than --logits-tol, with the "
                    "convention change that explains them");
    sub->add_option("--expect-hidden", o->expect_hidden,
                    "FILE.h5: an engine's residual stream, layer by layer (token_ids, layers/N/attn_residual, "
                    "layers/N/out; fixtures/SCHEMA.md): each attention sub-layer is run from the file's own input to "
                    "it and must give its attn_residual within --hidden-tol; a model whose FFN conform does not "
                    "compute (gpt-oss's experts) is checked this way");
    o->o_hidden_tol = sub->add_option("--hidden-tol", o->hidden_tol,
                                      "relative error (max |diff| / max |file|) each layer may have under "
                                      "--expect-hidden (default 1e-3)")
                          ->check(positive());
    sub->add_option("--logits-tol", o->f.logits_tol,
                    "relative error (max |diff| / max |expected|) --expect-logits allows (default 1e-3)")
        ->check(positive());
    sub->add_option("--save-logits", o->f.save_logits,
                    "write FILE.h5: token ids, positions, the reference's logits and each implementation's "
                    "(fixtures/SCHEMA.md, \"Logits files\")");
    sub->add_flag("--force", o->f.force, "let --save-logits overwrite an existing file");
    o->o_tokens =
        sub->add_option("--tokens", o->f.tokens_arg,
                        "T: tokens in the forward (default 8); with --weights: the token ids, comma-separated");
    sub->add_option("--impl", o->f.impls, "implementations, comma-separated (default: every available one but those run only when named, e.g. scalar-q8_0)");
    sub->add_option("--vocab", o->f.vocab,
                    "vocabulary of the random model (default 512; the real one only widens the LM head)");
    sub->add_option("--positions", o->f.start, "position of the first token (default 0)");
    sub->add_option("--seed", o->f.seed, "seed of the weights and tokens (default 1)");
    sub->add_option("--scale-down", o->f.scale_down,
                    "divide d_model and ffn by K (heads, head_dim, conventions and depth kept; default 1)");
    sub->add_option("--dtype", o->f.dtype, "dtype the implementations run in: f32, bf16, f16 (default f32)");
    sub->add_flag("--json", o->f.json, "print the table as JSON (schema conform-forward/1)");
    return {sub, [o] { return run_forward(*o); }};
}

}  // namespace conform::cli
