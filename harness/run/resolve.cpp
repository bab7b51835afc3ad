// The case-selection flags resolved (run/resolve.h).
#include "run/resolve.h"

#include <cstdlib>
#include <random>
#include <sstream>

#include "config/hf_config.h"

namespace conform::run {

uint64_t parse_seed(const std::string& text) {
    if (text.empty()) return kDefaultSeed;
    if (text == "random") return std::random_device{}() & 0xFFFFFFFFu;
    try {
        // Digits only: stoull would take "-1" as 2^64 - 1, and " 7" or "+7" as 7.
        if (text.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument("not digits");
        size_t used = 0;
        const uint64_t seed = std::stoull(text, &used);
        if (used != text.size()) throw std::invalid_argument("trailing");
        return seed;
    } catch (const std::exception&) {
        throw InputError("--seed: expected a number or 'random', found '" + text + "'");
    }
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

void apply_worker_flags(const WorkerFlags& f, ImplRequest& r) {
    if (f.no_isolate)
        throw InputError("--no-isolate: plugins and commands always run in a sandboxed worker process, never inside "
                         "conform (impls/PLUGINS.md, the threat model); the in-repo implementations run in process "
                         "unless --isolate");
    r.impl_libs = f.impl_libs;
    r.impl_cmds = f.impl_cmds;
    r.impl_fds = f.impl_fds;
    r.isolate = f.isolate;
    r.call_timeout_s = f.call_timeout_s;
    r.worker_memory = static_cast<uint64_t>(f.memory_gb * double(uint64_t(1) << 30));
    r.worker_cpu_s = static_cast<uint64_t>(f.cpu_s);
}

Resolved resolve_case_flags(const CaseFlags& f) {
    Resolved r;
    Selection& s = r.selection;
    if (!f.impls.empty() && f.impls != "all") {
        r.impls.names = split_list(f.impls);
        r.impls.names_explicit = true;
    }
    if (!f.ops.empty() && f.ops != "all")
        for (const auto& name : split_list(f.ops)) {
            const auto op = parse_op(name);
            if (!op) throw InputError("--op: unknown op '" + name + "' (ops: " + op_names() + ")");
            s.ops.push_back(*op);
        }
    const auto dt = parse_dtype(f.dtype);
    if (!dt) throw InputError("--dtype: unknown dtype '" + f.dtype + "' (f32, bf16, f16)");
    s.dtype = r.impls.options.dtype = *dt;
    s.seed = parse_seed(f.seed);
    // Which worker calls are repeated, and the poison each call's outputs are
    // filled with, follow the seed too: "--seed N reproduces this run" holds
    // for workers as well.
    r.impls.seed = s.seed;
    const bool full = f.full_size || !f.weights.empty();
    s.cases = f.cases >= 0 ? f.cases : full ? kFullSizeCases : 100;
    s.params = f.params;
    if (const std::string why = select::regex_problem(f.params); !why.empty())
        throw InputError("--params: '" + (f.params.size() > 60 ? f.params.substr(0, 60) + "..." : f.params) +
                         "' is not a valid regular expression: " + why);
    std::string why;
    const auto shard = select::resolve_shard(f.shard, std::getenv("TEST_SHARD_INDEX"), std::getenv("TEST_TOTAL_SHARDS"),
                                             &why);
    if (!shard) throw InputError(why);
    s.shard = *shard;
    s.case_id = f.case_id;
    s.fixtures = f.fixtures;
    s.default_fixtures = !f.no_default_fixtures;
    s.fixture_case = f.fixture_case;
    const bool model_inputs = f.inputs == "model";
    if (f.weights.empty()) {
        for (const auto& [given, flag] : {std::pair{!f.layers.empty(), "--layer/--layers"}, {model_inputs, "--inputs model"},
                                          {!f.tokens.empty(), "--tokens"}})
            if (given) throw InputError(std::string(flag) + ": only with --weights PATH (a checkpoint's layers)");
        if (f.full_size && !f.model.given())
            throw InputError("--full-size: name the model (--preset or --config); the drawn cases have no full size");
    } else {
        if (f.full_size) throw InputError("--full-size: --weights is always at full size");
        if (!model_inputs && (!f.tokens.empty() || (f.o_positions && f.o_positions->count())))
            throw InputError("--tokens / --positions: only with --inputs model (drawn inputs draw their positions)");
        RealOptions ro;
        ro.path = f.weights;
        ro.layers = f.layers;
        ro.model_inputs = model_inputs;
        if (!f.tokens.empty()) ro.tokens = parse_token_ids(f.tokens, "--tokens");
        ro.n_tokens = f.token_count;
        ro.start = f.positions;
        ro.overrides = f.model;
        r.real = RealModel::open(ro, nullptr);
        r.model = std::make_shared<const config::ModelConfig>(r.real->model());
        // The checkpoint readers read no experts yet: a mixture of experts is drawn, not a layer's;
        // nor any latent attention (no reader reads a DeepSeek checkpoint): the checkpoint has none.
        auto moe = [](Op op) { return op_info(op).uses(kMoeRoute) || op_info(op).uses(kMoeExperts); };
        if (s.ops.empty()) {
            for (Op op : kAllOps)
                if (!moe(op) && !op_info(op).uses(kMla)) s.ops.push_back(op);
        } else {
            for (Op op : s.ops) {
                if (moe(op))
                    throw InputError("--op " + std::string(to_string(op)) +
                                     ": --weights reads no experts yet (a mixture of experts runs on drawn weights: "
                                     "--preset or --config)");
                if (op_info(op).uses(kMla))
                    throw InputError("--op " + std::string(to_string(op)) +
                                     ": --weights reads no latent attention yet (DeepSeek's widths run on drawn "
                                     "weights: --preset deepseek-v3, --config, or the width flags)");
            }
        }
        s.real = r.real;
        s.pin = r.model->block;
        s.max_rows = f.max_rows > 0 ? f.max_rows : kFullSizeRows;
        return r;
    }
    if (f.model.given()) {
        try {
            r.model = std::make_shared<const config::ModelConfig>(config::resolve_config(f.model));
        } catch (const config::ConfigError& e) {
            throw InputError(e.what());
        }
        // A model with a part conform does not compute (gpt-oss's experts, its YaRN): the ops that
        // would run it are refused when named, and left out of "every op" with a line saying so.
        if (s.ops.empty()) {  // every op: stays "every op" unless the model leaves some out
            std::vector<Op> pinned;
            std::string left_out;
            for (Op op : kAllOps) {
                const std::string why = config::unmodelled_for(*r.model, op);
                if (why.empty()) pinned.push_back(op);
                else left_out += "\n  " + why;
            }
            if (!left_out.empty()) {
                s.ops = pinned;
                r.notes.push_back(r.model->name + ": the ops it pins are run, not these:" + left_out);
            }
        } else {
            for (Op op : s.ops)
                if (const std::string why = config::unmodelled_for(*r.model, op); !why.empty())
                    throw InputError("--op " + std::string(to_string(op)) + ": " + why);
        }
        if (!f.full_size)
            while (r.model->block.d_model / r.scale_down > 256) r.scale_down *= 2;
        else
            s.max_rows = f.max_rows > 0 ? f.max_rows : kFullSizeRows;
        s.pin = config::scale_down(r.model->block, r.scale_down);
    }
    return r;
}

}  // namespace conform::run
