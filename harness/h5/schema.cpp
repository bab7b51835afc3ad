#include "h5/schema.h"

#include "h5/fixture.h"

namespace conform::h5 {

bool is_vector_input(const std::string& name) {
    return name == "weight" || name == "attn_norm" || name == "ffn_norm" || name == "q_norm" || name == "k_norm";
}

// The optional RoPE attributes beyond theta, and which ones each scaling type
// takes (all explicit: no HF default is assumed for a missing one).
const std::vector<std::string> kScalingParams = {"rope_factor",   "rope_low_freq_factor", "rope_high_freq_factor",
                                      "rope_original_max_position", "rope_beta_fast", "rope_beta_slow",
                                      "rope_attention_factor"};

std::vector<std::string> scaling_params(RopeScalingType t) {
    switch (t) {
        case RopeScalingType::none: return {};
        case RopeScalingType::linear: return {"rope_factor"};
        case RopeScalingType::llama3:
            return {"rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_max_position"};
        case RopeScalingType::yarn:
            return {"rope_factor", "rope_original_max_position", "rope_beta_fast", "rope_beta_slow",
                    "rope_attention_factor"};
        case RopeScalingType::dynamic: return {"rope_factor", "rope_original_max_position"};
    }
    return {};
}
}  // namespace conform::h5
