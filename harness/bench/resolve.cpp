// conform bench's flags resolved into a Request (bench.h).
#include <algorithm>
#include <ostream>
#include <thread>

#include "bench/bench.h"
#include "config/hf_config.h"
#include "registry.h"
#include "run/plan.h"
#include "worker/client.h"

namespace conform::bench {

std::optional<Request> resolve(const Flags& o, std::ostream& err) {
    Request r;
    try {
        r.model = config::resolve_config(o.config, config::find_preset("tinyllama-1.1b")->model());
    } catch (const config::ConfigError& e) {
        err << "conform bench: " << e.what() << "\n";
        return std::nullopt;
    }
    // Its input sets carry no cache scales: timing the plain kernel under an FP8 label would mislead.
    if (r.model.block.kv_cache_dtype != KvCacheDtype::none) {
        err << "conform bench: --kv-cache-dtype: an FP8 KV cache is not timed yet (the bench's inputs have no "
               "k_scale / v_scale); `conform --op paged_attention --kv-cache-dtype ...` judges one\n";
        return std::nullopt;
    }
    // "all" is the block's ops: paged_attention's batches (--tokens sequences
    // of --context keys each) and a mixture of experts are asked for by name.
    // A mixture of experts is timed whole (moe: the router and the experts),
    // on a model that has one.
    auto moe_part = [](Op op) { return op == Op::moe_route || op == Op::moe_experts; };
    auto moe_op = [](Op op) { return op_info(op).uses(kMoeRoute) || op_info(op).uses(kMoeExperts); };
    if (o.ops == "all")
        for (Op op : kAllOps)
            if (!op_info(op).uses(kPaged) && !moe_op(op)) r.ops.push_back(op);  // (latent attention pages too)
    for (const auto& name : o.ops == "all" ? std::vector<std::string>{} : run::split_list(o.ops)) {
        auto op = parse_op(name);
        if (!op) {
            err << "conform bench: --op: unknown op '" << name << "'\n";
            return std::nullopt;
        }
        if (*op == Op::mla_attention && r.model.block.kv_lora_rank <= 0) {
            err << "conform bench: --op mla_attention: " << r.model.name
                << " has no latent attention (--preset deepseek-v3, or --kv-lora-rank, --qk-nope-head-dim, "
                   "--qk-rope-head-dim, --v-head-dim)\n";
            return std::nullopt;
        }
        if (moe_part(*op)) {
            err << "conform bench: --op " << name << ": a mixture of experts is timed whole (--op moe); `conform --op "
                << name << "` judges its part\n";
            return std::nullopt;
        }
        if (*op == Op::moe && r.model.block.n_experts <= 0) {
            err << "conform bench: --op moe: " << r.model.name
                << " has no mixture of experts (e.g. --preset qwen3-30b-a3b, mixtral-8x7b, qwen1.5-moe-a2.7b, "
                   "gpt-oss-20b)\n";
            return std::nullopt;
        }
        r.ops.push_back(*op);
    }
    for (const auto& t : run::split_list(o.tokens)) {
        try {
            r.tokens.push_back(std::stoll(t));
        } catch (const std::exception&) {
            r.tokens.push_back(0);
        }
        if (r.tokens.back() <= 0) {
            err << "conform bench: --tokens: expected positive counts, found '" << t << "'\n";
            return std::nullopt;
        }
    }
    for (const auto& d : run::split_list(o.dtypes)) {
        auto dt = parse_dtype(d);
        if (!dt || *dt == DType::f16) {
            err << "conform bench: --dtype: expected f32 or bf16, found '" << d << "'\n";
            return std::nullopt;
        }
        r.dtypes.push_back(*dt);
    }
    // Workers (--impl-lib, --impl-cmd, --impl-fd): each a process, timed per round trip.
    run::ImplRequest wr;  // no names: only the workers, no in-repo implementation is made here
    run::apply_worker_flags(o.workers, wr);
    wr.repeat_fraction = 0;  // bench checks every output itself; a repeated call would be timed
    std::vector<std::shared_ptr<worker::WorkerImpl>>& workers = r.workers;
    if (wr.has_workers()) {
        run::ImplSet set = run::choose_implementations(wr);
        for (auto& c : set.impls)
            if (c.worker) {
                c.impl.release();
                workers.emplace_back(c.worker);
            }
    }
    auto find_worker = [&](const std::string& n) -> std::shared_ptr<worker::WorkerImpl> {
        for (const auto& w : workers)
            if (w->hello().name == n) return w;
        return nullptr;
    };
    // Given only workers, the workers against torch.
    std::string impl_list = o.impls;
    if (impl_list.empty()) {
        impl_list = "simd,torch";
        if (!workers.empty()) {
            impl_list = "torch";
            for (const auto& w : workers) impl_list += "," + w->hello().name;
        }
    }
    r.impls = run::split_list(impl_list == "all" ? "simd,torch,scalar" : impl_list);
    // torch, scalar (through the interface), plugins, and every implementation with a bench op.
    std::string benched = "torch, torch-cuda, scalar";
    for (const auto& e : implementations())
        if (e.bench) benched += ", " + e.name;
    for (const auto& i : r.impls) {
        const ImplEntry* e = find_implementation(i);
        if (i != "torch" && i != "torch-cuda" && i != "scalar" && !(e && e->bench) && !find_worker(i)) {
            err << "conform bench: --impl: '" << i << "' is not benchmarked (" << benched
                << (workers.empty() ? "" : ", or a worker of --impl-lib / --impl-cmd / --impl-fd") << ")\n";
            return std::nullopt;
        }
    }
    r.context = o.context;
    r.min_time = o.min_time;
    r.min_reps = o.min_reps;
    r.max_reps = o.max_reps;
    r.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    r.settle_ms = o.settle_ms;
    r.simd_target = o.simd_target;
    return r;
}

}  // namespace conform::bench
