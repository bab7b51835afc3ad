#include "bench/inputs.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "config/anatomy.h"
#include "gen/gen.h"

namespace conform::bench {

namespace {

Tensor random(std::mt19937& rng, int64_t rows, int64_t cols, double scale) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    Tensor t(rows, cols);
    for (float& v : t.data) v = static_cast<float>(scale * n(rng));
    return t;
}

// Rows [begin, begin + n) of t.
Tensor rows_of(const Tensor& t, int64_t begin, int64_t n) {
    Tensor out(n, t.cols());
    std::copy(t.data.begin() + begin * t.cols(), t.data.begin() + (begin + n) * t.cols(), out.data.begin());
    return out;
}

}  // namespace

// Drawn as every case is (gen::materialize): weights N(0, 1/in) keep
// activations O(1) through the block, norm weights are not uniform (a wrong
// one would show). rope and qk_norm run on the queries [T, H*hd]; attention
// at T = 1 is one query after `context` keys, causal over T keys otherwise;
// a decode step is the sequence's last token, its `context` before it in the
// cache (bench's own bench op fills the cache from context_x).
Inputs make_inputs(Op op, const BlockConfig& cfg, int64_t T, int64_t context) {
    if (op_info(op).uses(kPaged)) {
        // A decode batch: T sequences of context + 1 keys each (the new
        // token's key already cached), one query each, in pages of 16 unless
        // the config says, the pool exactly what they need and one page.
        gen::CaseSpec s = gen::spec_at(op, cfg, 1, context + 1, 0, 1234);
        s.kv_lens.assign(static_cast<size_t>(T), context + 1);
        s.q_lens.assign(static_cast<size_t>(T), 1);
        s.T = T;
        s.S = T * (context + 1);
        s.pool = 1;
        Inputs in;
        in.c = gen::materialize(s);
        in.c.id.clear();
        return in;
    }
    const int64_t rows = op == Op::decode ? context + 1 : T;
    const int64_t keys = op == Op::attention && T == 1 ? context + 1 : T;
    Inputs in;
    in.c = gen::materialize(gen::spec_at(op, cfg, rows, keys, 0, 1234));
    Case& c = in.c;
    c.id.clear();
    if (op == Op::decode) {
        Tensor& x = c.inputs.at("x");
        in.context_x = rows_of(x, 0, context);
        in.context_pos = c.positions.at("positions");
        in.context_pos.pop_back();
        x = rows_of(x, context, 1);
        c.positions["positions"] = {context};
        c.prefill = 0;
    }
    return in;
}

Inputs input_set(const Inputs& base, int k) {
    if (k == 0) return base;
    Inputs in = base;
    std::mt19937 rng(1234u + 7919u * static_cast<unsigned>(k));
    for (const char* name : {"x", "q", "k", "v", "ckv_cache", "kpe_cache"})
        if (auto it = in.c.inputs.find(name); it != in.c.inputs.end())
            it->second = random(rng, it->second.rows(), it->second.cols(), 1.0);
    if (!in.context_x.data.empty()) in.context_x = random(rng, in.context_x.rows(), in.context_x.cols(), 1.0);
    if (in.c.op == Op::rope)
        for (int64_t& p : in.c.positions["positions"]) p += 101 * k;
    return in;
}

BenchInputs bench_inputs(const Inputs& in) {
    CaseCall call(in.c);
    BenchInputs b;
    b.op = in.c.op;
    b.config = in.c.config;
    b.x = call.in("x");
    b.weight = call.in("weight");
    b.q = call.in("q");
    b.k = call.in("k");
    b.v = call.in("v");
    b.w1 = call.in("w1");
    b.w3 = call.in("w3");
    b.w2 = call.in("w2");
    b.pos = call.pos("positions");
    b.q_pos = call.pos("q_positions");
    b.k_pos = call.pos("k_positions");
    if (op_info(in.c.op).uses(kResidual)) b.weights = calls::block_weights(call);
    if (op_info(in.c.op).uses(kPaged)) {
        const std::vector<const char*> pools = op_info(in.c.op).pools();  // k_cache, v_cache; MLA: ckv, kpe
        b.k = call.in(pools.at(0));
        b.v = call.in(pools.at(1));
        b.paged = paged_index(call);
    }
    if (in.c.op == Op::mla_attention) b.w_kv_b = call.in("w_kv_b");
    if (op_info(in.c.op).uses(kMoeRoute) || op_info(in.c.op).uses(kMoeExperts)) b.moe = calls::moe_weights(call);
    if (in.c.op == Op::decode) {
        b.context_x = in.context_x.view();
        b.context_pos = Positions{in.context_pos.data(), static_cast<int64_t>(in.context_pos.size())};
    }
    return b;
}

Cost cost(Op op, const config::ModelConfig& model, int64_t T, int64_t context, double es) {
    config::ModelConfig m = model;
    // The inputs make_inputs() gives each op: rmsnorm and swiglu on [T, D];
    // qk_norm and rope on the queries [T, H*hd] alone; attention over T
    // queries after `context` keys at T = 1, causal over T keys otherwise; a
    // block from empty; a decode step after `context` cached tokens.
    std::vector<std::string> parts;
    int64_t C = 0;
    switch (op) {
        case Op::rmsnorm:
            parts = {"attn_norm"};
            break;
        case Op::qk_norm:
            m.block.qk_norm = true;  // bench times the op whether the model has it or not
            parts = {"qk_norm:q"};
            break;
        case Op::rope:
            parts = {"rope:q"};
            break;
        case Op::attention:
            parts = {"attention"};
            C = T == 1 ? context : 0;
            break;
        case Op::swiglu:
            parts = {"gate_proj (w1)", "up_proj (w3)", "silu_mul", "down_proj (w2)"};
            break;
        case Op::block:
            parts = {"layer"};
            break;
        case Op::decode:
            parts = {"layer"};
            C = context;
            break;
        case Op::moe: {
            // The router's product, each token's K experts (two products and
            // the gate each), the shared expert; the weights of the experts
            // T tokens are expected to touch under a uniform router
            // (E (1 - (1 - K/E)^T)), the router's, the shared expert's.
            const BlockConfig& c = m.block;
            const double t = static_cast<double>(T), D = static_cast<double>(c.d_model);
            const double E = static_cast<double>(c.n_experts), K = static_cast<double>(c.n_experts_per_tok);
            const double F = static_cast<double>(c.moe_ffn_dim), Fs = static_cast<double>(c.moe_shared_ffn_dim);
            const double touched = E * (1.0 - std::pow(1.0 - K / E, t));
            const double flops = 2 * t * D * E + t * K * (6 * D * F + 4 * F + 3 * D) + t * (6 * D * Fs + 4 * Fs + 2 * D);
            const double weights = es * (D * E + touched * 3 * D * F + 3 * D * Fs);
            return {flops, weights + es * 2 * t * D, weights};
        }
        case Op::paged_attention: {
            // T sequences, each one query over its `context` cached keys and
            // its own: T times a decode step's attention (each reads its own keys).
            const config::CallCost k = config::call_cost(m, 1, context, es, {"attention"});
            const double n = static_cast<double>(T);
            return {n * k.flops, n * k.bytes, n * k.weight_bytes};
        }
        case Op::mla_attention: {
            // The absorbed decode: T sequences, one query each over its
            // context + 1 cached latents. Per query and head: q_nope @ w_ukᵀ
            // (dn·dc), scores over dc + dr, the latents' weighted sum (dc),
            // @ w_uv (dc·dv). The least it moves: each sequence's latents and
            // RoPE keys (dc + dr a token, for all H heads at once — MLA's
            // saving over 2·KV·hd), kv_b_proj once, q and out.
            const BlockConfig& c = m.block;
            const double t = static_cast<double>(T), n = static_cast<double>(context + 1), H = static_cast<double>(c.n_heads);
            const double dc = static_cast<double>(c.kv_lora_rank), dn = static_cast<double>(c.qk_nope_head_dim);
            const double dr = static_cast<double>(c.qk_rope_head_dim), dv = static_cast<double>(c.v_head_dim);
            const double flops = t * H * (2 * dn * dc + 2 * n * (dc + dr) + 2 * n * dc + 2 * dc * dv + 4 * n);
            const double weights = es * dc * H * (dn + dv);
            const double bytes = weights + es * t * (n * (dc + dr) + H * (dn + dr) + H * dv);
            return {flops, bytes, weights};
        }
    }
    const config::CallCost k = config::call_cost(m, T, C, es, parts);
    return {k.flops, k.bytes, k.weight_bytes};
}

}  // namespace conform::bench
