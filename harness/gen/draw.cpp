// The draw of a case's spec: its sizes, conventions, positions and inputs'
// magnitude, by RapidCheck's picks (so a failing case shrinks), then each
// twist the op reads by its row's draw (conform/twists.h), in draw_rank order.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <rapidcheck.h>

#include "gen/detail.h"

namespace conform::gen {

using detail::batch_totals;
using detail::pool_pages;

namespace {

// Every pick shrinks toward the first alternative, so counterexamples shrink to
// small, round cases (T=1, head_dim=4, position 0, theta 10000 ...).
// (RapidCheck's own element/weightedElement never shrink; an index drawn by
// inRange does, toward 0.) The index is drawn at full size: inRange scales its
// range with RapidCheck's size, which grows from 10 to 100 over a run, and
// would leave every later alternative unreachable until the last cases (a
// {5, 1} pick took its second branch only from case 90 on). A weight means
// the same in case 0 as in case 99.
template <typename T>
T pick_index(T n) {
    return *rc::gen::resize(100, rc::gen::inRange<T>(0, n));
}

template <typename T>
T weighted(std::initializer_list<std::pair<int, T>> items) {
    int total = 0;
    for (const auto& it : items) total += it.first;
    int u = pick_index<int>(total);
    for (const auto& it : items) {
        if (u < it.first) return it.second;
        u -= it.first;
    }
    return items.begin()->second;
}

template <typename T, typename... Ts>
T one_of(T first, Ts... rest) {
    const std::array<T, 1 + sizeof...(rest)> all{first, static_cast<T>(rest)...};
    return all[pick_index<size_t>(all.size())];
}

int64_t pick_position() {
    const int cls = weighted<int>({{3, 0}, {3, 1}, {2, 2}, {2, 3}, {1, 4}, {2, 5}, {1, 6}});
    switch (cls) {
        case 0: return 0;
        case 1: return *rc::gen::inRange<int64_t>(0, 64);
        case 2: return *rc::gen::inRange<int64_t>(4000, 4200);    // around 4096
        case 3: return *rc::gen::inRange<int64_t>(8192, 9000);    // past 8192 (llama3's original context)
        case 4: return *rc::gen::inRange<int64_t>(32700, 33000);  // 32k
        case 5: return *rc::gen::inRange<int64_t>(100000, 140000);
        default: return *rc::gen::inRange<int64_t>(400000, 600000);
    }
}

double pick_theta() {
    const int cls = weighted<int>({{3, 0}, {3, 1}, {3, 2}, {2, 3}});
    switch (cls) {
        case 0: return 10000.0;
        case 1: return 500000.0;
        case 2: return 1000000.0;
        default: return std::round(std::pow(10.0, *rc::gen::inRange<int>(300, 700) / 100.0));  // log-uniform 1e3..1e7
    }
}

// Small widths most of the time (cheap, and where indexing bugs show), and
// the head sizes real kernels tile for: 64, 80, 96 (Phi), 128 (Llama 3,
// Qwen3), 256 (Gemma).
int64_t pick_head_dim(int64_t max_hd) {
    for (;;) {
        const int64_t hd = weighted<int64_t>({{4, 4}, {3, 8}, {3, 16}, {1, 2}, {2, 6}, {2, 32}, {2, 64}, {1, 10},
                                              {2, 128}, {1, 80}, {1, 96}, {2, 256}});
        if (hd <= max_hd) return hd;
    }
}

int64_t pick_rows(int64_t max) {
    // 1 and sizes that are not multiples of 4/8/16 are the interesting ones.
    const int cls = weighted<int>({{2, 0}, {5, 1}, {1, 2}});
    if (cls == 0) return 1;
    if (cls == 1) return *rc::gen::inRange<int64_t>(1, max + 1);
    return std::min<int64_t>(max, one_of<int64_t>(17, 33, 31, 15));
}

// Keys for attention: mostly a few, a steady fraction crossing the tiles
// kernels use (64, 128 keys) with a remainder, and some long (past 2048)
// with a remainder off every power of two from 16 to 256.
int64_t pick_keys(const GenReach& reach) {
    const int cls = weighted<int>({{6, 0}, {2, 1}, {1, 2}});
    if (cls == 0) return pick_rows(reach.rows);
    // One past a tile, one short of one, and between: 16, 32, 64, 128, 256 keys.
    if (cls == 1) return one_of<int64_t>(65, 127, 129, 191, 257, 100, 33, 17, 200, 80);
    return one_of<int64_t>(2049, 1000, 2100, 1537, 777);
}

// MHA (KV = H), GQA (1 < KV < H), MQA (KV = 1), all common; and GQA with
// groups above 4 (Llama 3 8B 32/8 is 4; TinyLlama 32/4 and Llama 3 70B 64/8
// are 8, Qwen2.5 7B 28/4 is 7): where a kernel that maps query heads to kv
// heads one way for small groups and another for large ones differs (h % KV
// against h / group needs 1 < KV and group > 1 to tell). Up to 32 heads, so
// a case stays cheap; only where max_heads allows 8 or more.
void pick_heads(CaseSpec& s, int64_t max_heads) {
    const int cls = max_heads >= 8 ? weighted<int>({{2, 0}, {3, 1}, {2, 2}, {1, 3}})
                                   : weighted<int>({{2, 0}, {3, 1}, {2, 2}});
    if (cls == 0) {
        s.config.n_heads = s.config.n_kv_heads = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(5, max_heads) + 1);
    } else if (cls == 1) {
        s.config.n_kv_heads = *rc::gen::inRange<int64_t>(2, 5);
        const int64_t group = *rc::gen::inRange<int64_t>(2, 5);
        s.config.n_heads = s.config.n_kv_heads * group;
    } else if (cls == 2) {
        s.config.n_kv_heads = 1;
        s.config.n_heads = *rc::gen::inRange<int64_t>(2, 9);
    } else {
        s.config.n_kv_heads = *rc::gen::inRange<int64_t>(2, 5);
        const int64_t group = *rc::gen::inRange<int64_t>(5, 32 / s.config.n_kv_heads + 1);
        s.config.n_heads = s.config.n_kv_heads * group;
    }
}


int64_t pick_width(int64_t small_max, std::initializer_list<int64_t> large) {
    const bool big = weighted<int>({{5, 0}, {1, 1}}) == 1;
    if (!big) return *rc::gen::inRange<int64_t>(1, small_max + 1);
    std::vector<int64_t> l(large);
    return l[pick_index<size_t>(l.size())];
}

void pick_inputs(CaseSpec& s) {
    s.mag = weighted<double>({{6, 1.0}, {2, 1e-3}, {2, 30.0}});
    s.outliers = weighted<int64_t>({{4, 0}, {1, 1}, {1, 3}});
    s.seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
}

// The block's score scale (CaseSpec::qk_gain): mostly the drawn ~N(0, 1)
// scores, sometimes ~N(0, 16²) or ~N(0, 256²). Drawn last of all, so a case
// with gain 1 is the case its seed drew before the gain existed.
void pick_qk_gain(CaseSpec& s) { s.qk_gain = weighted<double>({{6, 1.0}, {2, 4.0}, {1, 16.0}}); }


// RapidCheck's picks, as a twist's draw asks for them.
struct RcPicker : TwistPicker {
    size_t pick(std::initializer_list<int> weights) override {
        int total = 0;
        for (int w : weights) total += w;
        int u = pick_index<int>(total);
        size_t i = 0;
        for (int w : weights) {
            if (u < w) return i;
            u -= w;
            ++i;
        }
        return 0;
    }
    bool coin() override { return *rc::gen::arbitrary<bool>(); }
    int64_t between(int64_t lo, int64_t hi) override { return *rc::gen::inRange<int64_t>(lo, hi + 1); }
};

// The twists' rows in the order their draws were added (draw_rank).
const std::vector<const Twist*>& by_draw_rank() {
    static const std::vector<const Twist*> rows = [] {
        std::vector<const Twist*> r;
        for (const Twist& t : twist_table())
            if (t.draw) r.push_back(&t);
        std::stable_sort(r.begin(), r.end(), [](const Twist* a, const Twist* b) { return a->draw_rank < b->draw_rank; });
        return r;
    }();
    return rows;
}

// Each twist the op reads, drawn after everything else the case draws.
void draw_twists(CaseSpec& s) {
    const OpInfo& info = op_info(s.op);
    // What a query can reach: its keys (the window), and the positions (the chunk).
    int64_t keys = s.T, reach = s.T + s.pos;
    if (s.op == Op::attention) keys = s.S, reach = s.S + s.kpos;
    if (info.uses(kPaged))
        keys = reach = std::max<int64_t>(1, s.kv_lens.empty() ? 1 : *std::max_element(s.kv_lens.begin(), s.kv_lens.end()));
    const int64_t step = info.uses(kPaged) ? std::max<int64_t>(1, s.config.page_size) : 64;
    RcPicker picker;
    for (const Twist* t : by_draw_rank()) {
        if (!info.reads(*t)) continue;
        TwistDraw d{s.op, s.config, keys, reach, step, score_scale(s), picker};
        set_twist_value(*t, s.config, t->draw(d));
        if (t->mean_id) s.bias_mean = d.tensor_mean;
    }
}

// Partial rotary (GPT-NeoX, Phi, GLM: a half or a quarter of the head), then
// RoPE scaling with the parameters real checkpoints use. Drawn after
// everything else, so a case without them is the case its seed drew before
// they existed; every pick shrinks to "none" first.
void pick_rope_extras(CaseSpec& s) {
    const int64_t part = weighted<int64_t>({{5, 1}, {1, 2}, {1, 4}});
    if (part > 1 && s.config.head_dim % (2 * part) == 0) s.config.rotary_dim = s.config.head_dim / part;
    const int64_t rd = s.config.rotary_dim > 0 ? s.config.rotary_dim : s.config.head_dim;
    RopeScaling& sc = s.config.rope_scaling;
    sc.type = weighted<RopeScalingType>({{5, RopeScalingType::none},
                                         {1, RopeScalingType::linear},
                                         {1, RopeScalingType::llama3},
                                         {1, RopeScalingType::yarn},
                                         {2, RopeScalingType::dynamic}});
    if (sc.type == RopeScalingType::dynamic && rd <= 2) sc.type = RopeScalingType::linear;  // its exponent is rd / (rd - 2)
    switch (sc.type) {
        case RopeScalingType::none: break;
        case RopeScalingType::linear: sc.factor = one_of(2.0, 4.0, 8.0, 3.0); break;
        case RopeScalingType::llama3:
            // Llama 3.1 / 3.2 config.json
            sc.factor = 8;
            sc.low_freq_factor = 1;
            sc.high_freq_factor = 4;
            sc.original_max_position = 8192;
            s.config.rope_theta = 500000;
            break;
        case RopeScalingType::yarn:
            // Qwen2.5 / Qwen3 long context; attention_factor as HF's get_mscale(factor)
            sc.factor = 4;
            sc.original_max_position = 32768;
            sc.beta_fast = 32;
            sc.beta_slow = 1;
            sc.attention_factor = 0.1 * std::log(sc.factor) + 1.0;
            break;
        case RopeScalingType::dynamic: {
            // The original context placed around the case's own length L, so
            // that cases fall on both sides of it, and on its edge (L = orig
            // is still unscaled); or short (16..64), wherever pos fell. pos
            // itself is left as drawn, so that shrinking to no scaling keeps
            // a failing case failing.
            sc.factor = one_of(2.0, 3.0, 4.0);
            const int cls = weighted<int>({{2, 0}, {1, 1}, {1, 2}, {1, 3}});
            const auto ps = positions_of(s.pos, s.T, s.shape);
            const int64_t L = *std::max_element(ps.begin(), ps.end()) + 1;  // max position + 1
            if (cls == 0) {
                sc.original_max_position = std::max<int64_t>(1, L + *rc::gen::inRange<int64_t>(-16, 17));
            } else if (cls == 1) {
                sc.original_max_position = L;  // the last position inside
            } else if (cls == 2) {
                sc.original_max_position = std::max<int64_t>(1, L - 1);  // one past
            } else {
                sc.original_max_position = *rc::gen::inRange<int64_t>(16, 65);  // wherever pos fell
            }
            break;
        }
    }
}

// paged_attention's batch (CaseSpec::kv_lens, q_lens). Page sizes as
// engines use them (vLLM 16, FlashInfer 1 to 256, llama.cpp-like 5); per
// sequence the key counts that sit on page boundaries (0, 1, P-1, P, P+1,
// kP±1), short and middling ones and, rarely, one past 8k; queries one (a
// decode step), a few, the whole sequence (a prefill) or a chunk after a
// cached prefix. The batch is a RapidCheck container, so a failing batch
// shrinks by dropping sequences, wherever they are.
int64_t pick_page_size() { return weighted<int64_t>({{3, 16}, {2, 8}, {2, 5}, {1, 1}, {1, 64}, {1, 128}, {1, 256}}); }

rc::Gen<std::pair<int64_t, int64_t>> sequence_gen(int64_t P) {
    return rc::gen::exec([P] {
        int64_t kv = 0;
        switch (weighted<int>({{4, 0}, {3, 1}, {1, 2}, {2, 3}, {1, 4}})) {
            case 0: kv = *rc::gen::inRange<int64_t>(1, 41); break;
            case 1: {
                const int64_t k = one_of<int64_t>(1, 2, 3);
                kv = std::max<int64_t>(0, k * P + one_of<int64_t>(-1, 0, 1));
                break;
            }
            case 2: kv = 0; break;  // empty: its queries see no key
            case 3: kv = *rc::gen::inRange<int64_t>(41, 600); break;
            default: kv = weighted<int64_t>({{4, 0}, {1, 1}}) ? one_of<int64_t>(8191, 8193, 8200) : 1; break;
        }
        int64_t q = 1;
        switch (weighted<int>({{4, 0}, {2, 1}, {2, 2}, {1, 3}, {1, 4}})) {
            case 0: q = 1; break;                                   // a decode step
            case 1: q = *rc::gen::inRange<int64_t>(2, 9); break;    // a few (speculative decoding)
            case 2: q = kv <= 300 ? kv : 16; break;                 // a prefill (past 300 keys: its last 16)
            case 3: q = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(1, std::min<int64_t>(kv, 64)) + 1); break;  // a chunk
            default: q = 0; break;                                  // in the batch with no new token
        }
        if (kv == 0) q = std::min<int64_t>(q, 1);
        q = std::min(q, std::max<int64_t>(kv, q == 0 ? 0 : 1));
        if (kv > 600) q = std::min<int64_t>(q, 8);  // a long sequence decodes or takes a short chunk
        return std::make_pair(kv, q);
    });
}

void pick_batch(CaseSpec& s) {
    pick_heads(s, 8);
    s.config.head_dim = pick_head_dim(op_info(Op::paged_attention).reach.head_dim_max);
    s.config.page_size = pick_page_size();
    const int64_t most = weighted<int64_t>({{5, 4}, {2, 1}, {2, 20}});
    const auto batch = *rc::gen::resize(most, rc::gen::nonEmpty(rc::gen::container<std::vector<std::pair<int64_t, int64_t>>>(
                                                 sequence_gen(s.config.page_size))));
    s.kv_lens.clear();
    s.q_lens.clear();
    for (const auto& [kv, q] : batch) s.kv_lens.push_back(kv), s.q_lens.push_back(q);
    if (std::all_of(s.q_lens.begin(), s.q_lens.end(), [](int64_t q) { return q == 0; })) s.q_lens[0] = 1;
    batch_totals(s);
    // The pool at most 2^22 floats per cache: narrower heads where it is large.
    while (pool_pages(s) * s.config.page_size * s.config.n_kv_heads * s.config.head_dim > (int64_t{1} << 22) &&
           s.config.head_dim > 8)
        s.config.head_dim /= 2;
    if (s.S > 4000) s.config.head_dim = std::min<int64_t>(s.config.head_dim, 64);
    s.config.head_dim += s.config.head_dim % 2;
}

// A batch over a model's own latent widths (DeepSeek-V3's: every key's latent
// through kv_b_proj is dc x H x (dn + dv) = 2^24 products in the reference's
// MHA form): sequences dropped from the end, then the one left cut short,
// until the batch's keys cost at most 2^31 products (128 keys at V3's widths),
// as a drawn batch's narrow widths do.
void fit_latent_batch(CaseSpec& s) {
    const BlockConfig& c = s.config;
    const int64_t per_key = c.kv_lora_rank * c.n_heads * (c.qk_nope_head_dim + c.v_head_dim);
    const int64_t budget = std::max<int64_t>(1, (int64_t{1} << 31) / std::max<int64_t>(per_key, 1));
    auto keys = [&] { return std::accumulate(s.kv_lens.begin(), s.kv_lens.end(), int64_t{0}); };
    while (s.kv_lens.size() > 1 && keys() > budget) s.kv_lens.pop_back(), s.q_lens.pop_back();
    if (keys() > budget) {
        s.kv_lens[0] = budget;
        s.q_lens[0] = std::min(s.q_lens[0], budget);
    }
    if (std::all_of(s.q_lens.begin(), s.q_lens.end(), [](int64_t q) { return q == 0; })) s.q_lens[0] = 1;
    batch_totals(s);
}

// A pinned stream: the configuration every drawn case takes, as far as its op
// reads it (its config fields and the dims of its inputs, conform/op_info.h).
void pin(CaseSpec& s, const BlockConfig& c) {
    const OpInfo& info = op_info(s.op);
    if (info.uses(kRope)) {
        s.config.head_dim = c.head_dim;
        s.config.rotary_dim = c.rotary_dim;
        s.config.rope_layout = c.rope_layout;
        s.config.rope_theta = c.rope_theta;
        s.config.rope_scaling = c.rope_scaling;
    }
    if (info.reads("n_heads")) {
        s.config.n_heads = c.n_heads;
        s.config.n_kv_heads = c.n_kv_heads;
    }
    if (info.reads("head_dim")) s.config.head_dim = c.head_dim;
    if (info.reads("page_size") && c.page_size > 0) s.config.page_size = c.page_size;
    if (info.has_dim(Dim::D)) s.config.d_model = c.d_model;
    if (info.has_dim(Dim::F)) s.config.ffn_dim = c.ffn_dim;
    if (info.reads("qk_norm")) s.config.qk_norm = c.qk_norm;
    // Every twist the op reads, as the pin has it (RoPE's came with the RoPE above).
    for (const Twist& t : twist_table()) {
        if (t.core || !info.reads(t)) continue;
        set_twist_value(t, s.config, twist_value(t, c));
        if (t.mean_id && !twist_on(t, c)) s.bias_mean = 0.0;
    }
    if (info.reads("norm_eps")) s.config.norm_eps = c.norm_eps;
    if (info.reads("n_experts")) s.config.n_experts = c.n_experts, s.config.n_experts_per_tok = c.n_experts_per_tok;
    if (info.reads("moe_ffn_dim")) s.config.moe_ffn_dim = c.moe_ffn_dim;
    if (info.reads("kv_lora_rank") && c.kv_lora_rank > 0) {  // latent attention: the model's widths, one latent for every head
        s.config.kv_lora_rank = c.kv_lora_rank;
        s.config.qk_nope_head_dim = c.qk_nope_head_dim;
        s.config.qk_rope_head_dim = c.qk_rope_head_dim;
        s.config.v_head_dim = c.v_head_dim;
        s.config.n_kv_heads = s.config.n_heads;
        fit_latent_batch(s);
    }
}

// A checkpoint's layer: its weights; with model inputs, the first T rows of
// its real stream at the positions they were computed at (so the drawn
// position, shape, magnitude and outliers give way to the stream's).
void take_layer(CaseSpec& s, const std::shared_ptr<const RealLayer>& real) {
    // A paged batch takes no weights and no stream: its inputs stay drawn,
    // at the checkpoint's heads and head_dim (the pin).
    if (op_info(s.op).uses(kPaged)) return;
    s.layer = real->layer;
    s.real = real;
    s.model_inputs = real->model_inputs;
    if (!s.model_inputs) return;
    const int64_t n = real->rows;
    s.mag = 1;
    s.outliers = 0;
    s.qk_gain = 1;  // the checkpoint's own q and k
    s.shape = CaseSpec::Shape::contiguous;
    s.T = std::min(s.T, n);
    if (s.op == Op::attention) {
        s.S = std::min(s.S, n);
        s.T = std::min(s.T, s.S);
        s.kpos = real->start;
        s.pos = real->start + s.S - s.T;  // the keys' last T: a prefill, a chunk, a decode step
    } else {
        s.pos = real->start;
    }
    s.prefill = std::min(s.prefill, s.T);
    // rope and qk_norm take q's rows: all of the model's query heads.
    if ((s.op == Op::rope || s.op == Op::qk_norm) && real->n_heads > 0) s.config.n_heads = s.config.n_kv_heads = real->n_heads;
}


}  // namespace

CaseSpec detail::make(const Stream& st) {
    const Op op = st.op;
    const std::optional<BlockConfig>& pinned = st.pin;
    // Rows of the ops with weights, at most st.max_rows (a full-size block).
    auto cap = [&](int64_t rows) { return st.max_rows > 0 ? std::min(rows, st.max_rows) : rows; };
    CaseSpec s;
    s.op = op;
    const GenReach& reach = op_info(op).reach;
    // The op's own shape family (its rows, heads, keys, pages): per op by
    // nature, like the tensors it materialises (materialize.cpp) and the id
    // fields that name them (ids.cpp); twists are drawn from their rows after.
    switch (op) {
        case Op::rmsnorm:
            s.T = pick_rows(reach.rows);
            s.config.d_model = pick_width(130, {1024, 2048, 4096, 5120, 1031, 4100});  // and tails off the vector width
            s.config.norm_eps = one_of(1e-5, 1e-6);
            break;
        case Op::rope:
            s.T = pick_rows(reach.rows);
            s.config.head_dim = pick_head_dim(reach.head_dim_max);
            s.config.n_heads = *rc::gen::inRange<int64_t>(1, 6);
            s.config.rope_layout = one_of(RopeLayout::neox, RopeLayout::interleaved);
            s.config.rope_theta = pick_theta();
            s.pos = pick_position();
            s.shape = weighted<CaseSpec::Shape>({{6, CaseSpec::Shape::contiguous},
                                                 {1, CaseSpec::Shape::gaps},
                                                 {1, CaseSpec::Shape::restarts},
                                                 {1, CaseSpec::Shape::shuffled}});
            break;
        case Op::qk_norm:
            s.T = pick_rows(reach.rows);
            s.config.head_dim = pick_head_dim(reach.head_dim_max);
            s.config.n_heads = *rc::gen::inRange<int64_t>(1, 6);
            s.config.norm_eps = one_of(1e-6, 1e-5);
            break;
        case Op::attention: {
            pick_heads(s, 8);
            s.config.head_dim = pick_head_dim(reach.head_dim_max);
            s.S = pick_keys(reach);
            // Every pairing: a prefill (T = S), a chunk after a cached prefix
            // (T < S), one decoding query (T = 1), a few queries over many keys.
            const int tq = weighted<int>({{3, 0}, {3, 1}, {1, 2}, {1, 3}});
            switch (tq) {
                case 0: s.T = s.S <= 300 ? s.S : 64; break;  // a prefill (past 300 keys: its last 64 queries)
                case 1: s.T = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(s.S, 64) + 1); break;
                case 2: s.T = 1; break;
                default: s.T = std::min<int64_t>(s.S, one_of<int64_t>(2, 5, 8)); break;
            }
            if (s.S > 256) s.config.head_dim = std::min<int64_t>(s.config.head_dim, 128);  // long keys: keep T·S·hd small
            s.kpos = pick_position();
            // Mostly the queries are the tail of the keys (prefill, chunked
            // prefill, decode); sometimes elsewhere, so some rows see few or no keys.
            const bool tail = weighted<int>({{5, 0}, {1, 1}}) == 0;
            s.pos = tail ? s.kpos + s.S - s.T : s.kpos + *rc::gen::inRange<int64_t>(-4, s.S + 4);
            // Queries before the first key stay there (keys moved up), so that
            // rows seeing no key at all occur from position 0 on as well.
            if (s.pos < 0) s.kpos -= s.pos, s.pos = 0;
            s.shape = weighted<CaseSpec::Shape>({{6, CaseSpec::Shape::contiguous},
                                                 {1, CaseSpec::Shape::gaps},
                                                 {1, CaseSpec::Shape::restarts},
                                                 {1, CaseSpec::Shape::shuffled}});
            break;
        }
        case Op::paged_attention: pick_batch(s); break;
        case Op::mla_attention: {
            // DeepSeek's shapes scaled down (V3: dc 512, dn 128, dr 64, dv 128),
            // and shapes that tell the widths apart: dv != dn, dr > dn, dc below dn.
            pick_batch(s);
            s.config.n_kv_heads = s.config.n_heads, s.config.head_dim = 0;  // one latent for every head; its own widths
            s.config.kv_lora_rank = weighted<int64_t>({{3, 16}, {3, 32}, {2, 8}, {1, 64}, {1, 512}, {1, 5}});
            s.config.qk_nope_head_dim = weighted<int64_t>({{3, 8}, {2, 16}, {2, 4}, {1, 32}, {1, 3}});
            s.config.qk_rope_head_dim = weighted<int64_t>({{3, 4}, {2, 8}, {1, 2}, {1, 16}, {1, 64}});
            s.config.v_head_dim = weighted<int>({{3, 0}, {1, 1}}) == 0 ? s.config.qk_nope_head_dim
                                                                        : *rc::gen::inRange<int64_t>(1, 33);
            // The pool at most 2^22 floats; long sequences with narrow latents (the reference's kv_b_proj).
            while ((pool_pages(s) * s.config.page_size * (s.config.kv_lora_rank + s.config.qk_rope_head_dim) >
                        (int64_t{1} << 22) ||
                    (s.S > 2000 && s.config.kv_lora_rank > 32)) &&
                   s.config.kv_lora_rank > 4)
                s.config.kv_lora_rank /= 2;
            // Never dc = dn: a scale over the absorbed width (dc + dr) would be the model's there.
            if (s.config.kv_lora_rank == s.config.qk_nope_head_dim) ++s.config.kv_lora_rank;
            break;
        }
        case Op::moe:
        case Op::moe_route:
        case Op::moe_experts: {
            // Few experts to many (gpt-oss 32, Qwen3 128, DeepSeek-V3 256: the
            // router's choice among 64 is as hard), K of them per token.
            s.T = cap(pick_rows(reach.rows));
            s.config.d_model = *rc::gen::inRange<int64_t>(4, 97);
            s.config.n_experts = weighted<int64_t>({{2, 4}, {3, 8}, {2, 16}, {1, 2}, {1, 64}});
            s.config.n_experts_per_tok =
                *rc::gen::inRange<int64_t>(1, std::min<int64_t>(s.config.n_experts, 8) + 1);
            if (op != Op::moe_route) s.config.moe_ffn_dim = *rc::gen::inRange<int64_t>(2, 65);
            break;
        }
        case Op::swiglu:
            s.T = cap(pick_rows(reach.rows));
            s.config.d_model = pick_width(96, {512, 520});
            s.config.ffn_dim = pick_width(200, {1376, 2816, 1400});
            break;
        case Op::block:
        case Op::decode: {
            // Mostly short; some long (a block of up to 512 tokens; a decode
            // of 300+ steps after its prefill), then with narrow widths so
            // the case stays cheap.
            const bool long_run = weighted<int>({{9, 0}, {1, 1}}) == 1;
            s.T = cap(!long_run ? pick_rows(reach.rows)
                                : op == Op::block ? one_of<int64_t>(64, 130, 257, 512) : one_of<int64_t>(317, 40, 129, 333));
            pick_heads(s, long_run ? 4 : 8);
            s.config.head_dim = pick_head_dim(long_run ? 32 : reach.head_dim_max);
            s.config.d_model = *rc::gen::inRange<int64_t>(4, long_run ? 49 : 97);
            s.config.ffn_dim = *rc::gen::inRange<int64_t>(4, long_run ? 97 : 193);
            s.config.rope_layout = one_of(RopeLayout::neox, RopeLayout::interleaved);
            s.config.rope_theta = pick_theta();
            s.config.qk_norm = *rc::gen::arbitrary<bool>();
            s.config.norm_eps = one_of(1e-5, 1e-6);
            s.pos = pick_position();
            s.shape = weighted<CaseSpec::Shape>({{5, CaseSpec::Shape::contiguous}, {1, CaseSpec::Shape::gaps}});
            if (op == Op::decode)
                s.prefill = long_run ? one_of<int64_t>(0, 7, s.T / 2) : *rc::gen::inRange<int64_t>(0, s.T + 1);
            break;
        }
    }
    pick_inputs(s);
    // A router's input is a normed hidden state, O(1): at magnitude 30 its
    // sigmoid scores saturate to 1 in float32 and tie (materialize.cpp draws no tie).
    if (op_info(op).uses(kMoeRoute)) s.mag = weighted<double>({{6, 1.0}, {2, 0.25}, {2, 3.0}});
    // Scores past ±5e4 (a kernel's "-inf" of -5e4 then masks real keys,
    // flashinfer #4267): q and k at magnitude 300 make scores ~N(0, 9e4²).
    if (op_info(op).uses(kPaged) && weighted<int>({{8, 0}, {1, 1}})) s.mag = 300.0;
    if (op_info(op).uses(kRope)) pick_rope_extras(s);
    if (op_info(op).uses(kResidual)) pick_qk_gain(s);
    draw_twists(s);
    if (pinned) pin(s, *pinned);
    if (st.real) take_layer(s, st.real);
    // Asked only what it declares: a twist the implementation does not
    // compute is left off (the case its seed drew, without it). A pinned
    // config is the model's: its cases are not offered where a twist is undeclared.
    if (!pinned)
        for (const Twist& t : twist_table())
            if (op_info(op).reads(t) && !st.twists.allows(t, s.config)) {
                reset_twist(t, s.config);
                if (t.mean_id) s.bias_mean = 0.0;
            }
    // And a twist that applies only with one left off goes with it (topk_group with n_group).
    if (!pinned)
        for (const Twist& t : twist_table())
            if (op_info(op).reads(t) && t.applies && !t.applies(s.config)) reset_twist(t, s.config);
    return s;
}

const char* to_string(CaseSpec::Shape s) {
    switch (s) {
        case CaseSpec::Shape::contiguous: return "contiguous";
        case CaseSpec::Shape::gaps: return "gaps";
        case CaseSpec::Shape::restarts: return "restarts";
        case CaseSpec::Shape::shuffled: return "shuffled";
    }
    return "?";
}

std::vector<int64_t> positions_of(int64_t start, int64_t n, CaseSpec::Shape shape) {
    std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
    int64_t gap = 0;
    int64_t k = 1;
    if (shape == CaseSpec::Shape::shuffled && n > 1) {
        k = (n / 2) | 1;  // odd, and stepped until coprime with n
        while (std::gcd(k, n) != 1) k += 2;
    }
    for (int64_t i = 0; i < n; ++i) {
        switch (shape) {
            case CaseSpec::Shape::contiguous: p[i] = start + i; break;
            case CaseSpec::Shape::gaps: gap += (i * 7) % 3; p[i] = start + i + gap; break;
            case CaseSpec::Shape::restarts: p[i] = start + i % ((n + 1) / 2); break;
            case CaseSpec::Shape::shuffled: p[i] = start + (i * k) % n; break;
        }
    }
    return p;
}

rc::Gen<CaseSpec> spec_gen(const Stream& s) {
    return rc::gen::exec([s] { return detail::make(s); });
}

rc::Gen<CaseSpec> spec_gen(Op op, const std::optional<BlockConfig>& pin) { return spec_gen(Stream{op, 0, pin, {}, 0}); }

CaseSpec spec_at(Op op, const BlockConfig& c, int64_t T, int64_t S, int64_t start, uint64_t seed) {
    CaseSpec s;
    s.op = op;
    s.T = T;
    s.S = S;
    s.config = c;
    s.kpos = start;
    s.pos = op == Op::attention ? start + S - T : start;
    s.seed = seed;
    if (op_info(op).uses(kPaged)) {  // one sequence of S keys, its last T the queries, in pages of 16 unless the config says
        if (s.config.page_size <= 0) s.config.page_size = 16;
        s.kv_lens = {S};
        s.q_lens = {std::min(T, S)};
        s.T = s.q_lens[0];
    }
    if (op_info(op).uses(kMla)) s.config.n_kv_heads = s.config.n_heads, s.config.head_dim = 0;  // one latent, its own widths
    return s;
}

double score_scale(const CaseSpec& s) {
    const double g = op_info(s.op).uses(kResidual) ? s.qk_gain : s.mag;
    return g * g;
}

}  // namespace conform::gen
