// The catalogue of hypotheses: one convention changed each, named by the bug
// (semantics.md, bug classes) and by the id of the mutant that has it.
#include <cmath>
#include <fmt/format.h>

#include "conform/dtype.h"

#include "diagnose/diagnose.h"

namespace conform::diagnose {

namespace {

// Which families apply: the conventions the op's result depends on (conform/op_info.h).
bool uses(Op op, uint32_t c) { return op_info(op).uses(c); }
// Keys with positions of their own (attention's k_positions): a query may then see no key at all.
bool own_key_positions(Op op) {
    for (const PositionSpec& p : op_info(op).positions)
        if (p.n == Dim::S) return true;
    return false;
}

const char* pairs(RopeLayout l) { return l == RopeLayout::neox ? "(i, i + d/2)" : "(2i, 2i + 1)"; }

std::string g(double v) { return fmt::format("{:g}", v); }

// The bases checkpoints use, and the config's by a factor of ten either way
// (a dropped or extra zero).
std::vector<double> theta_candidates(double config) {
    std::vector<double> out;
    for (double t : {1e4, 1e5, 5e5, 1e6, config * 10, config / 10}) {
        bool seen = std::abs(t / config - 1) < 1e-9;
        for (double o : out) seen = seen || std::abs(t / o - 1) < 1e-9;
        if (!seen) out.push_back(t);
    }
    return out;
}

}  // namespace

std::vector<Hypothesis> hypotheses(const Case& c) {
    const BlockConfig& cfg = c.config;
    const Op op = c.op;
    std::vector<Hypothesis> h;
    auto add = [&](std::string id, ref::Variant v, std::string why) { h.push_back({std::move(id), v, std::move(why)}); };
    // A hypothesis that is one of the reference's bug switches turned on.
    auto flag = [&](std::string id, bool ref::Variant::*on, std::string why) {
        ref::Variant v;
        v.*on = true;
        add(std::move(id), v, std::move(why));
    };

    // A paged batch's rows as a kernel with a paging bug reads them (the
    // reference's gather: paged_attention and latent attention alike).
    auto paged_rows = [&] {
        // A sequence's keys sit at positions 0..kv_len-1 and its queries
        // are its last rows (bottom-right); the bug puts them at its
        // start (top-left), and a sliding window then follows them.
        flag("paged_queries_at_start", &ref::Variant::paged_queries_at_start,
            "new queries placed at the start of their sequence (top-left causal): query j must sit at position "
            "kv_len - q_len + j, after the sequence's cached keys");
        flag("paged_sequences_packed", &ref::Variant::paged_sequences_packed,
            "the batch attended as one packed sequence: a query also sees the keys of the sequences before its "
            "own (qo_indptr / kv_indptr boundaries ignored)");
        flag("paged_block_table_ignored", &ref::Variant::paged_block_table_ignored,
            "the block table ignored: a sequence's pages read as consecutive from its first "
            "(kv_indices[kv_indptr[b]] + i) instead of kv_indices[kv_indptr[b] + i]");
        flag("paged_last_page_len_ignored", &ref::Variant::paged_last_page_len_ignored,
            "every sequence's last page read whole: kv_last_page_len ignored (a sequence has (n - 1) * page_size + "
            "last_page_len keys)");
        flag("paged_kv_len_off_by_one", &ref::Variant::paged_one_slot_past,
            "a sequence's keys counted one too many where its last page is partial: the slot after its last key "
            "read (and the queries placed one position later); it has (n - 1) * page_size + last_page_len keys");
        flag("paged_partial_page_dropped", &ref::Variant::paged_partial_page_dropped,
            "pages counted as kv_len / page_size (floor): a sequence's last partial page, and its keys, dropped; "
            "it has ceil(kv_len / page_size) pages");
    };
    auto split_merge = [&] {
        flag("split_kv_merge_unrescaled", &ref::Variant::paged_split_unrescaled,
             fmt::format("a split-KV merge (a split per page of {}) that adds the splits' sums and outputs as "
                         "they are: each split's exp(s - m_i) is never rescaled by exp(m_i - m) to the row's "
                         "max m, so a split with a lower max weighs too much (a flash-decoding combine "
                         "without its correction)",
                         cfg.page_size));
    };
    auto lse_forms = [&] {
        flag("paged_lse_base2", &ref::Variant::lse_base2,
             "lse returned in base 2 (log2 of the softmax's denominator); the contract is the natural log");
        flag("paged_lse_max_dropped", &ref::Variant::lse_max_dropped,
             "lse returned as log(sum exp(s - m)), the row's max m it was shifted by not added back; the lse is "
             "m + log(sum exp(s - m)) (a merge weighing splits by it weighs them wrong)");
    };
    // Latent attention (docs/mla.md): its own conventions, and a paged batch's.
    if (uses(op, kMla)) {
        const double dc = static_cast<double>(cfg.kv_lora_rank), dr = static_cast<double>(cfg.qk_rope_head_dim);
        const double right = score_scale(cfg.attn_scale, cfg.mla_qk_dim()), absorbed = 1.0 / std::sqrt(dc + dr);
        if (std::abs(absorbed / right - 1) > 1e-12) {
            ref::Variant v;
            v.scale = absorbed;
            add("mla_scale_absorbed_dim", v,
                fmt::format("scores scaled by 1/sqrt(kv_lora_rank + qk_rope_head_dim) = 1/sqrt({}), the absorbed "
                            "form's width; the model's scale is {} whatever width the kernel multiplies in",
                            cfg.kv_lora_rank + cfg.qk_rope_head_dim,
                            cfg.attn_scale > 0 ? fmt::format("the config's attn_scale {}", g(cfg.attn_scale))
                                               : fmt::format("1/sqrt(qk_nope + qk_rope) = 1/sqrt({})", cfg.mla_qk_dim())));
        }
        flag("mla_w_uk_transposed", &ref::Variant::mla_w_uk_transposed,
             fmt::format("kv_b_proj's key half w_uk read per head as if stored [qk_nope, kv_lora_rank] = [{}, {}]: "
                         "it is [kv_lora_rank, qk_nope] (a repacked weight read in the old layout)",
                         cfg.qk_nope_head_dim, cfg.kv_lora_rank));
        flag("mla_w_uv_missing", &ref::Variant::mla_w_uv_missing,
             fmt::format("w_uv never applied: each head's output is the first v_head_dim = {} columns of its "
                         "softmax-weighted latent sum (kv_lora_rank = {} wide, zeros past it); the absorbed form "
                         "ends with o_lat @ w_uv",
                         cfg.v_head_dim, cfg.kv_lora_rank));
        paged_rows();
        split_merge();
        lse_forms();
    }

    if (uses(op, kRope)) {
        ref::Variant v;
        const RopeLayout other = cfg.rope_layout == RopeLayout::neox ? RopeLayout::interleaved : RopeLayout::neox;
        v.layout = other;
        add("rope_layout_swapped", v,
            fmt::format("NeoX/interleaved pairing swapped: RoPE rotates {} pairs {}, the config says {} {}",
                        to_string(other), pairs(other), to_string(cfg.rope_layout), pairs(cfg.rope_layout)));
        for (double t : theta_candidates(cfg.rope_theta)) {
            ref::Variant vt;
            vt.theta = t;
            if (t == 1e4)
                add("rope_theta_default", vt,
                    fmt::format("rope_theta not propagated: RoPE uses the default 10000, the config says {}",
                                g(cfg.rope_theta)));
            else
                add("rope_theta_wrong", vt,
                    fmt::format("wrong RoPE base: theta {} where the config says {}", g(t), g(cfg.rope_theta)));
        }
        const RopeScaling& sc = cfg.rope_scaling;
        if (sc.type != RopeScalingType::none) {
            if (sc.type == RopeScalingType::dynamic) {
                flag("dynamic_ntk_inside_context", &ref::Variant::dynamic_at_scaled_context,
                    fmt::format("dynamic NTK's base computed for seq_len = original_max_position x factor = {} "
                                "whatever the sequence's length: within the original {} positions RoPE must be "
                                "left unscaled",
                                g(sc.factor * static_cast<double>(sc.original_max_position)), sc.original_max_position));
            }
            if (sc.type == RopeScalingType::llama3 || sc.type == RopeScalingType::yarn) {
                ref::Variant vl;
                vl.scaling_type = RopeScalingType::linear;
                add("rope_scaling_type_wrong", vl,
                    fmt::format("rope_scaling read as linear (every frequency / {}); the config says {}", g(sc.factor),
                                to_string(sc.type)));
            }
        }
        flag("rope_angle_low_precision", &ref::Variant::rope_angle_bf16,
            "RoPE angles (position x inv_freq) rounded to bf16 before cos/sin; compute them in float32 or wider");
        flag("rope_cos_sin_bf16", &ref::Variant::rope_cos_sin_bf16,
            "RoPE's cos/sin table held in bf16 (a cache in the model's dtype) in a float32 kernel: keep it in float32");
        flag("rope_inv_freq_bf16", &ref::Variant::rope_inv_freq_bf16,
             "RoPE's inverse frequencies held in bf16: compute and keep them in float32");
        flag("rope_positions_f16", &ref::Variant::rope_positions_f16,
            "positions rounded to f16 before the angle (exact only up to 2048): keep positions integer or float32");
        flag("rope_position_from_row_index", &ref::Variant::rope_pos_from_start,
            "each row rotated at positions[0] + its row index, not at its own position: the position array "
            "(gaps, restarts, any order) is what defines the angle");
        // The converse of a scaling bug: scaling applied although the config
        // has none (a long-context variant's kernel run on a plain config, or
        // a golden file made with scaling judged without it).
        if (sc.type == RopeScalingType::none) {
            std::vector<RopeScaling> present;
            RopeScaling l3;
            l3.type = RopeScalingType::llama3, l3.factor = 8, l3.low_freq_factor = 1, l3.high_freq_factor = 4,
            l3.original_max_position = 8192;
            present.push_back(l3);
            for (double f : {2.0, 4.0, 8.0}) {
                RopeScaling lin;
                lin.type = RopeScalingType::linear, lin.factor = f;
                present.push_back(lin);
            }
            for (double f : {2.0, 4.0, 8.0})
                for (int64_t orig : {4096, 32768}) {
                    RopeScaling y;
                    y.type = RopeScalingType::yarn, y.factor = f, y.original_max_position = orig, y.beta_fast = 32,
                    y.beta_slow = 1, y.attention_factor = 0.1 * std::log(f) + 1.0;
                    present.push_back(y);
                }
            for (const RopeScaling& s : present) {
                ref::Variant vsc;
                vsc.scaling = s;
                add("rope_scaling_not_in_config", vsc,
                    fmt::format("RoPE is scaled ({} with factor {}{}) although the config has no rope_scaling",
                                to_string(s.type), g(s.factor),
                                s.original_max_position ? fmt::format(", original context {}", s.original_max_position)
                                                        : std::string()));
            }
        }
        for (int64_t shift : {+1, -1}) {
            ref::Variant vs;
            if (uses(op, kKvCache)) {
                vs.decode_pos_shift = shift;
                add("rope_position_off_by_one", vs,
                    fmt::format("decode steps rotated at pos {:+d} (the prefill is right): the decode position is "
                                "off by one",
                                shift));
            } else {
                vs.rope_pos_shift = shift;
                add("rope_position_off_by_one", vs, fmt::format("positions off by one: rotated at pos {:+d}", shift));
            }
        }
    }
    // Each twist's bugs (conform/twists.h): a kernel that ignores it (the
    // field reset, where it is on), and its bugs as config edits.
    for (const Twist& t : twist_table()) {
        if (!op_info(op).reads(t)) continue;
        if (t.ignored && twist_on(t, cfg)) {
            BlockConfig e = cfg;
            reset_twist(t, e);
            add(t.ignored, ref::Variant::with_config(cfg, e), t.ignored_why(cfg));
        }
        for (const TwistBug& b : t.bugs)
            for (const BlockConfig& e : b.as(cfg)) add(b.id, ref::Variant::with_config(cfg, e), b.why(cfg, e));
    }
    if (uses(op, kResidual)) {
        flag("rope_applied_twice", &ref::Variant::rope_twice,
             "q and k rotated twice: RoPE applied in two places (model and attention kernel)");
        flag("v_rotated", &ref::Variant::v_rotated,
             "v rotated like k: RoPE applies to q and k only, v is cached as projected");
        if (uses(op, kKvCache)) {
            flag("decode_cache_unrotated_k", &ref::Variant::k_unrotated,
                "decode steps cache their key before RoPE: the KV cache must hold rotated keys");
        }
        ref::Variant vq;
        if (cfg.qk_norm) {
            vq.qk_norm = ref::Variant::QkNorm::after_rope;
            add("qk_norm_after_rope", vq, "QK-norm applied after RoPE; Qwen3 normalises q and k before rotating them");
            if (cfg.n_heads > 1) {
                vq.qk_norm = ref::Variant::QkNorm::all_heads;
                add("qk_norm_over_all_heads", vq,
                    "QK-norm over all heads at once (one RMS over n_heads x head_dim, as a fused kernel might); Qwen3 "
                    "normalises each head on its own");
            }
        } else {
            vq.qk_norm = ref::Variant::QkNorm::on_unit_weights;
            add("qk_norm_always_on", vq, "QK-norm applied although the config has qk_norm off");
        }
        if (cfg.qkv_bias) {
            ref::Variant vb;
            vb.qkv_bias = ref::Variant::QkvBias::after_rope;
            add("qkv_bias_after_rope", vb,
                "q and k biases added after RoPE: the bias belongs to the projection, so it is rotated with it "
                "(and normed with it under QK-norm)");
        }
        if (cfg.sandwich_norm && uses(op, kSandwichNorm)) {
            ref::Variant vs;
            vs.sandwich = ref::Variant::Sandwich::after_residual;
            add("sandwich_norm_after_residual", vs,
                "the sandwich norms taken after the residual add (h = norm(x + attn)): they norm the sublayer's "
                "output before it, h = x + norm(attn @ wo), and the stream is never normed");
        }
        flag("residual_missing", &ref::Variant::residual_missing,
             "attention residual dropped: h = attn @ wo, where it must be x + attn @ wo");
        flag("post_norm", &ref::Variant::post_norm,
            "post-norm (h = norm(x + attn(x)), out = norm(h + ffn(h))) where the Llama block is pre-norm "
            "(each sublayer reads norm(x), the residual stream is never normed)");
    }
    if (uses(op, kMoeRoute) && cfg.moe_selection_bias) {
        flag("selection_bias_in_weights", &ref::Variant::moe_weights_from_choice,
            "the routing weights taken from scores + e_bias, the scores the choice is made on; DeepSeek-V3's "
            "weights are the unbiased scores (e_score_correction_bias is for the choice only)");
    }
    if (uses(op, kMoeRoute)) {
        flag("router_in_bf16", &ref::Variant::moe_router_bf16,
             "the router's logits and scores held in bf16, where the model's router is float32 (DeepSeek's, "
             "gpt-oss's; vllm#54048, vllm#14027): the weights move by bf16's rounding and a near-tie flips");
        if (cfg.moe_n_group > 0)
            flag("group_mask_fill_zero", &ref::Variant::moe_group_mask_zero,
                 "the groups not kept filled with 0.0 (HF's DeepseekV3TopkRouter masked_fill) where DeepSeek's "
                 "inference masks them with -inf: a masked expert beats a kept one whose biased score is negative");
        if (cfg.moe_scoring == MoeScoring::softmax && cfg.moe_norm_topk_prob) {
            // The same function as renorm_missing's config edit, under the name a gpt-oss kernel's author knows.
            BlockConfig over_all = cfg;
            over_all.moe_norm_topk_prob = false;
            add("topk_softmax_over_all", ref::Variant::with_config(cfg, over_all),
                "the softmax taken over all E logits and the top k of it kept, where gpt-oss's router takes the "
                "softmax over the k chosen logits (the same as renormalising the k: norm_topk_prob)");
        }
    }
    if (uses(op, kMoeExperts) && cfg.moe_swiglu_limit > 0)
        flag("swiglu_clamp_dropped", &ref::Variant::moe_swiglu_no_clamp,
             "gpt-oss's SwiGLU without its clamps, gate * sigmoid(1.702 gate) * (up + 1); gpt-oss clamps gate <= " +
                 g(cfg.moe_swiglu_limit) + " and up to [-" + g(cfg.moe_swiglu_limit) + ", " + g(cfg.moe_swiglu_limit) +
                 "] first (tokenspeed#1647)");
    if (uses(op, kMoeExperts) && cfg.moe_shared_ffn_dim > 0)
        flag("shared_expert_doubled", &ref::Variant::moe_shared_twice,
             "the shared expert's output added twice (once fused into the routed sum, once after it)");
    if (uses(op, kMoeExperts) && cfg.moe_expert_bias && !cfg.moe_weight_on_input) {
        flag("expert_bias_after_weight", &ref::Variant::moe_down_bias_after_weight,
            "each expert's down bias b2 added after its routing weight, w * (a @ w2) + b2; gpt-oss adds it first, "
            "(a @ w2 + b2) * w");
    }
    if (uses(op, kSinks) && cfg.attn_sinks) {
        ref::Variant vs;
        if (cfg.n_kv_heads < cfg.n_heads) {
            vs.sinks = ref::Variant::Sinks::per_kv_head;
            add("sink_wrong_head", vs,
                fmt::format("sinks read per kv head (query head h took sinks[h / {}]); there is one sink per query "
                            "head, sinks[h]",
                            cfg.n_heads / cfg.n_kv_heads));
        }
        const double scale = score_scale(cfg.attn_scale, cfg.head_dim);
        if (std::abs(scale - 1) > 1e-12) {
            ref::Variant vc;
            vc.sinks = ref::Variant::Sinks::scaled;
            add("sink_scaled", vc,
                fmt::format("each sink logit multiplied by the score scale {} like a score; the sink joins the "
                            "softmax's logits as it stands (gpt-oss: cat([scores * scale, sinks]))",
                            g(scale)));
        }
    }
    if (uses(op, kFp8Cache) && cfg.kv_cache_dtype != KvCacheDtype::none) {
        using K = ref::Variant::KvFp8;
        const char* dt = to_string(cfg.kv_cache_dtype);
        auto kv = [&](const char* id, K bug, std::string what) {
            ref::Variant v;
            v.kv_fp8 = bug;
            add(id, v, std::move(what));
        };
        kv("kv_fp8_scale_ignored", K::scale_ignored,
           fmt::format("the {} cache's scales taken as 1.0 (sglang #20705): K and V must be written as fp8(x / scale) "
                       "and read as code * scale",
                       dt));
        kv("kv_fp8_k_scale_for_v", K::k_scale_for_v,
           "V written and read with K's scale (sglang #26852: v_descale given k_scale); V has its own, v_scale");
        if (cfg.kv_scale_per_head && cfg.n_kv_heads > 1)
            kv("kv_fp8_per_head_read_per_tensor", K::per_tensor_read,
               fmt::format("per-kv-head scales read as one per tensor (every head took scale[0]); kv head g's columns "
                           "use scale[g] ({} of each)",
                           cfg.n_kv_heads));
        kv("kv_fp8_truncated", K::truncated,
           fmt::format("the {} cache written with truncation (toward zero); the conversion rounds to nearest even", dt));
        kv("kv_fp8_unsaturated", K::unsaturated,
           fmt::format("the {} cache written without saturation: a value past the format's max ({}) became {}; the "
                       "write saturates at the max (CUDA's __NV_SATFINITE, vLLM's cache write)",
                       dt, fp8_format(cfg.kv_cache_dtype).max,
                       cfg.kv_cache_dtype == KvCacheDtype::fp8_e4m3 ? "NaN" : "inf"));
        kv("kv_fp8_dequant_twice", K::dequant_twice,
           "the cache dequantised twice: read as code * scale * scale, where it is code * scale once");
        kv("kv_fp8_read_divides", K::read_divides,
           "the cache read back as code / scale, the write's division repeated; it is code * scale");
        kv("kv_fp8_reciprocal_scale", K::reciprocal_scale,
           fmt::format("the {} cache written as fp8(k * fl(1 / scale)): the reciprocal's rounding moves k / scale off "
                       "a rounding tie of the format to another code; the write is fp8(k / scale), one division",
                       dt));
    }
    if (uses(op, kSoftcap) && cfg.attn_logit_softcapping > 0) {
        const double cap = cfg.attn_logit_softcapping;
        flag("softcap_after_mask", &ref::Variant::softcap_after_mask,
            fmt::format("soft-cap applied after the mask: tanh turns each masked key's -inf into a logit of -{}, so "
                        "masked keys are read; the cap goes on the raw scores, before the mask",
                        cap));
    }
    if (uses(op, kCausal)) {
        const int64_t H = cfg.n_heads, KV = cfg.n_kv_heads, hd = cfg.head_dim;
        if (KV > 1 && KV < H) {
            flag("gqa_head_mapping_tiled", &ref::Variant::gqa_tiled,
                fmt::format("query head h reads kv head h % {} (tiled); it must read h / {} (repeat_interleave)", KV,
                            H / KV));
        }
        ref::Variant vm;
        vm.mask = ref::Variant::Mask::none;
        add("causal_mask_missing", vm, "no causal mask: queries see later keys");
        vm.mask = ref::Variant::Mask::strict;
        add("causal_mask_off_by_one", vm,
            "causal mask off by one: the diagonal is masked (k_pos < q_pos); a query must see its own key");
        vm.mask = ref::Variant::Mask::plus_one;
        add("causal_mask_off_by_one", vm, "causal mask off by one: a query also sees the next key (k_pos <= q_pos + 1)");
        // Scales a kernel may use instead of the config's (1/sqrt(head_dim), or
        // its attn_scale: Gemma 2/3's query_pre_attn_scalar^-1/2), each once.
        const double right = score_scale(cfg.attn_scale, hd);
        const std::string right_is = cfg.attn_scale > 0 ? fmt::format("the config's attn_scale {}", g(cfg.attn_scale))
                                                        : fmt::format("1/sqrt(head_dim) = 1/sqrt({})", hd);
        std::vector<std::pair<double, std::string>> scales = {
            {1.0 / std::sqrt(double(H * hd)), fmt::format("1/sqrt(n_heads * head_dim) = 1/sqrt({})", H * hd)},
            {1.0, "1 (no scale)"},
            {1.0 / double(hd), fmt::format("1/head_dim = 1/{}", hd)},
        };
        if (cfg.attn_scale > 0)  // both: the config's scale and the default one multiplied in
            scales.push_back({cfg.attn_scale / std::sqrt(double(hd)),
                              fmt::format("attn_scale x 1/sqrt(head_dim) = {} / sqrt({})", g(cfg.attn_scale), hd)});
        if (uses(op, kResidual))
            scales.insert(scales.begin() + 1, {1.0 / std::sqrt(double(cfg.d_model)),
                                               fmt::format("1/sqrt(d_model) = 1/sqrt({})", cfg.d_model)});
        // (One that equals attn_scale_ignored's 1/sqrt(head_dim), at n_heads 1, is
        // kept: the two bugs coincide there, and both are named.)
        std::vector<double> used;
        for (const auto& [s, what] : scales) {
            bool same = std::abs(s / right - 1) < 1e-12;
            for (double u : used) same = same || std::abs(s / u - 1) < 1e-12;
            if (same) continue;
            used.push_back(s);
            ref::Variant v;
            v.scale = s;
            add("attention_scale_wrong", v, fmt::format("scores scaled by {} instead of {}", what, right_is));
        }
        if (uses(op, kPaged)) {
            paged_rows();
            if (!cfg.attn_sinks && (cfg.sliding_window > 0 || cfg.attention_chunk_size > 0)) {
                flag("split_kv_merge_nan", &ref::Variant::paged_first_page_empty_nan,
                    fmt::format("NaN where a query's first page ({} keys) holds no key it sees and a later page does: "
                                "a split-KV merge that starts from (max -inf, sum 0) computes exp(-inf - -inf); start "
                                "from the first split that has a key, or guard the rescale",
                                cfg.page_size));
            }
            if (!cfg.attn_sinks) split_merge();
            if (cfg.attn_sinks) {
                flag("sink_missing_from_lse", &ref::Variant::paged_lse_without_sink,
                    "lse over the keys alone, the sink left out (the output has it): the lse is the log of the whole "
                    "denominator, exp(sink) included, so that a later merge weighs this part rightly");
                flag("sink_per_split", &ref::Variant::paged_sink_per_page,
                    "the sink added once per page of a sequence: each split of a split-KV kernel starts its softmax "
                    "from the sink (max sink, sum 1) and the merge adds them all; the sink joins the softmax once, when "
                    "the splits are merged");
            }
            lse_forms();
        } else if (!uses(op, kResidual) || op == Op::block) {
            // Derived from the row index: wrong as soon as positions are not
            // the rows (a chunk after a cache, gaps, any order).
            ref::Variant vi;
            vi.mask = ref::Variant::Mask::index_tail;
            add("causal_mask_by_index", vi,
                "the mask follows row indices (key j visible to query i iff j <= i + S - T), not the positions: "
                "key j must be visible iff k_pos[j] <= q_pos[i]");
            vi.mask = ref::Variant::Mask::index_top;
            add("causal_mask_by_index", vi, "the mask follows row indices top-left aligned (key j visible iff j <= i)");
        }
        if (hd > 64) {
            ref::Variant vt;
            vt.score_dims = 64;
            add("head_dim_truncated", vt,
                fmt::format("q.k over the first 64 of head_dim = {} dims only: one 64-lane tile of the head", hd));
        }
        ref::Variant vtile;
        vtile.softmax_tile = 64;
        add("softmax_tile_not_rescaled", vtile,
            "the softmax runs over tiles of 64 keys and does not rescale its running sums when the max grows "
            "(flash attention without the exp(m_old - m_new) correction)");
        ref::Variant vring;
        vring.kv_ring = 16;
        add("kv_cache_wraps_early", vring,
            "a decoding query sees only the last 16 cached keys: a KV ring that wraps before the context ends");
        flag("softmax_no_max_subtraction", &ref::Variant::softmax_no_max,
            "softmax without subtracting the row max: exp overflows for scores above ~88.7 and gives NaN");
        if (own_key_positions(op)) {
            flag("masked_row_nan", &ref::Variant::empty_row_nan,
                 "a query that sees no key gets NaN (softmax over an all -inf row); it must get zeros");
        }
    }
    if (cfg.sliding_window > 0 && (op == Op::attention || op == Op::paged_attention)) {
        const std::string W = std::to_string(cfg.sliding_window);
        ref::Variant vf;
        vf.window = ref::Variant::Window::from_first_query;
        add("window_from_first_query", vf,
            "the window's edge taken from the first query of the call (k_pos > q_pos[0] - " + W +
                ") for every query: each query's window ends at its own position (k_pos > q_pos - " + W + ")");
        if (op == Op::paged_attention) {
            ref::Variant vp;
            vp.window = ref::Variant::Window::by_page;
            vp.window_page = cfg.page_size;
            add("window_per_page", vp,
                fmt::format("the window applied by whole pages of {}: the first page in the window read whole, its "
                            "keys before q_pos - {} not masked",
                            cfg.page_size, cfg.sliding_window - 1));
            ref::Variant vd;
            vd.window = ref::Variant::Window::decode_only;
            add("window_ignored_in_prefill", vd,
                "the window applied on the decode path only: a sequence with more than one new query attends every "
                "earlier key (a window of " + W + " holds on every path)");
            ref::Variant vpre;
            vpre.window = ref::Variant::Window::prefill_only;
            add("window_ignored_in_decode", vpre,
                "the window applied on the prefill path only: a sequence with one new query (a decode step) attends "
                "every earlier key (a window of " + W + " holds on every path; a decode kernel not given it)");
        }
    }
    if (uses(op, kRmsNorm)) {
        flag("layer_norm_not_rms", &ref::Variant::layer_norm,
             "LayerNorm (the mean subtracted) where the model uses RMSNorm (no centring)");
        flag("rmsnorm_eps_outside_sqrt", &ref::Variant::rms_eps_outside,
             "RMSNorm adds eps outside the square root: x / (sqrt(mean(x^2)) + eps)");
        flag("rmsnorm_mean_not_squared", &ref::Variant::rms_mean_abs,
             "RMSNorm divides by sqrt(mean|x|) where it must use mean(x^2)");
        if (cfg.d_model % 8 != 0 || cfg.head_dim % 8 != 0) {
            flag("rmsnorm_tail_skipped", &ref::Variant::rms_tail_skipped,
                "RMSNorm's sum of squares leaves out the last n % 8 elements of each row (a vector loop without its "
                "scalar tail); every element is in the mean");
        }
    }
    if (uses(op, kSwiglu)) {
        const bool geglu = cfg.hidden_act == HiddenAct::gelu_tanh;
        flag("swiglu_gate_on_up", &ref::Variant::swiglu_gate_on_up,
            std::string(geglu ? "gelu_tanh" : "SiLU") + " applied to the up branch (x @ w3) instead of the gate (x @ w1)");
        ref::Variant vg;
        vg.gelu_gate = true;
        if (geglu)
            add("gelu_erf_for_tanh", vg,
                "exact (erf) GELU on the gate where the config's GeGLU uses the tanh approximation "
                "(hidden_act gelu_pytorch_tanh: F.gelu(a, approximate=\"tanh\"); the two differ by up to 4.7e-4 near "
                "|a| = 2)");
        else
            add("gelu_gate", vg, "GELU on the gate (a GELU MLP's activation) where SwiGLU uses SiLU");
    }
    return h;
}

std::vector<std::pair<std::string, BlockConfig>> config_hypotheses(const BlockConfig& c) {
    Case block;
    block.op = Op::block;
    block.config = c;
    std::vector<std::pair<std::string, BlockConfig>> out;
    for (const Hypothesis& h : hypotheses(block)) {
        // A twist's bug is a config already; the RoPE's layout and base move
        // into one. Any other knob left means the hypothesis is not a config.
        ref::Variant rest = h.variant;
        BlockConfig v = rest.config.value_or(c);
        rest.config.reset();
        rest.edited.clear();
        std::string value;
        if (rest.layout) v.rope_layout = *rest.layout, rest.layout.reset();
        if (rest.theta) value = fmt::format(" (theta {})", g(*rest.theta)), v.rope_theta = *rest.theta, rest.theta.reset();
        if (!rest.faithful() || h.variant.faithful()) continue;
        out.emplace_back(h.id + value, v);
    }
    return out;
}

}  // namespace conform::diagnose
