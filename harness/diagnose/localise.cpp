// Localisation: the first tensor that diverges, and where in it.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "diagnose/diagnose.h"

namespace conform::diagnose {

namespace {

// "0-3, 5, 7"
std::string ranges(const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        s += (s.empty() ? "" : ", ") + (j == i ? std::to_string(v[i]) : fmt::format("{}-{}", v[i], v[j]));
        i = j + 1;
    }
    return s;
}

double abs_err(double a, double b) {
    const double d = std::abs(a - b);
    return std::isnan(d) ? INFINITY : d;
}

// Max error of each group of elements, groups given by key(row, col).
template <typename Key>
std::vector<double> max_by(const DTensor& obs, const DTensor& ref, int64_t groups, Key key) {
    std::vector<double> e(static_cast<size_t>(groups), 0.0);
    const int64_t rows = ref.rows(), cols = ref.cols();
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < cols; ++col) {
            const size_t i = static_cast<size_t>(r * cols + col);
            double& g = e[static_cast<size_t>(key(r, col))];
            g = std::max(g, abs_err(obs.data[i], ref.data[i]));
        }
    return e;
}

std::vector<int64_t> over(const std::vector<double>& e, double allowed) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < e.size(); ++i)
        if (!(e[i] <= allowed)) v.push_back(static_cast<int64_t>(i));
    return v;
}

// Pearson correlation of per-token error with position, over finite errors.
std::optional<double> correlation(const std::vector<int64_t>& pos, const std::vector<double>& e) {
    double n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (size_t i = 0; i < e.size() && i < pos.size(); ++i) {
        if (!std::isfinite(e[i])) continue;
        const double x = static_cast<double>(pos[i]), y = e[i];
        n += 1, sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
    }
    if (n < 3) return std::nullopt;
    const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n;
    if (vx <= 0 || vy <= 0) return std::nullopt;
    return (sxy - sx * sy / n) / std::sqrt(vx * vy);
}

struct Shape {
    int64_t head_dim = 0;             // 0: no heads
    bool rotated = false;             // RoPE's output: pairs by the config's layout
    RopeLayout layout = RopeLayout::neox;
    const std::vector<int64_t>* positions = nullptr;  // per row, when rows are tokens at positions
};

// Where the error of one tensor sits: tokens (and whether it grows with
// position), heads, and for a rotated tensor the rotary pairs (pair i turns at
// inv_freq = theta^(-2i/hd): i = 0 the highest frequency). A layout swap
// spoils every pair, a wrong theta every pair but i = 0 (inv_freq 1 whatever
// theta), angles in low precision the high-frequency ones, a tiled kv mapping
// only the heads whose kv head moved.
std::vector<std::string> patterns(const DTensor& obs, const DTensor& ref, double allowed, const Shape& sh) {
    std::vector<std::string> p;
    const int64_t rows = ref.rows(), cols = ref.cols();
    if (obs.data.size() != ref.data.size() || rows == 0 || cols == 0) return p;

    const auto by_token = max_by(obs, ref, rows, [](int64_t r, int64_t) { return r; });
    const auto bad_tokens = over(by_token, allowed);
    // (None over it: the tensor failed by what it chose, a router's experts, not by its values.)
    if (rows > 1 && !bad_tokens.empty())
        p.push_back(bad_tokens.size() == static_cast<size_t>(rows)
                        ? fmt::format("all {} tokens over the bound", rows)
                        : fmt::format("tokens over the bound: {} of {}", ranges(bad_tokens), rows));
    if (sh.positions) {
        if (auto r = correlation(*sh.positions, by_token))
            p.push_back(fmt::format("error vs position r = {:.2f} ({})", *r,
                                    *r > 0.8 ? "grows with position" : *r < -0.8 ? "shrinks with position" : "no trend"));
        if (sh.rotated)
            for (int64_t t = 0; t < rows && t < static_cast<int64_t>(sh.positions->size()); ++t)
                if ((*sh.positions)[t] == 0 && by_token[t] <= allowed && !bad_tokens.empty()) {
                    p.push_back("the token at position 0 conforms (RoPE is the identity there)");
                    break;
                }
    }
    const int64_t hd = sh.head_dim;
    if (hd > 0 && cols % hd == 0 && cols / hd > 1) {
        const int64_t n = cols / hd;
        const auto bad = over(max_by(obs, ref, n, [hd](int64_t, int64_t c) { return c / hd; }), allowed);
        if (bad.size() == static_cast<size_t>(n)) {
            p.push_back(fmt::format("all {} heads", n));
        } else if (!bad.empty()) {
            std::vector<int64_t> good;
            for (int64_t h = 0; h < n; ++h)
                if (std::find(bad.begin(), bad.end(), h) == bad.end()) good.push_back(h);
            p.push_back(fmt::format("confined to heads {} of {} (heads {} conform)", ranges(bad), n, ranges(good)));
        }
    }
    if (sh.rotated && hd >= 2 && cols % hd == 0) {
        const int64_t half = hd / 2;
        const bool neox = sh.layout == RopeLayout::neox;
        const auto bad = over(max_by(obs, ref, half,
                                     [hd, half, neox](int64_t, int64_t c) {
                                         const int64_t d = c % hd;
                                         return neox ? d % half : d / 2;
                                     }),
                              allowed);
        std::string s = fmt::format("rotary pairs over the bound ({} pairing {}, i = 0 the highest frequency): ",
                                    to_string(sh.layout), neox ? "(i, i + hd/2)" : "(2i, 2i + 1)");
        if (bad.size() == static_cast<size_t>(half))
            s += fmt::format("all {}", half);
        else
            s += fmt::format("i in {} of {}", bad.empty() ? "none" : ranges(bad), half);
        if (!bad.empty() && bad.front() > 0) s += "; i = 0 (inv_freq 1, the same for every theta) conforms";
        p.push_back(s);
    }
    return p;
}

const std::vector<int64_t>* positions_of(const Case& c) {
    for (const char* name : {"positions", "q_positions"}) {
        auto it = c.positions.find(name);
        if (it != c.positions.end()) return &it->second;
    }
    return nullptr;
}

Shape shape_of(const Case& c, const std::string& tensor) {
    Shape s;
    s.head_dim = head_dim_of(c, tensor);
    // RoPE's own output: the rope op's out, the block's rotated taps.
    s.rotated = (c.op == Op::rope && tensor == "out") || tensor == "q_rot" || tensor == "k_rot";
    s.layout = c.config.rope_layout;
    s.positions = positions_of(c);
    return s;
}

const TensorResult* tensor_of(const CaseResult& r, const std::string& name) {
    for (const auto& t : r.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

// Fills first divergence, the taps before it, and the patterns of that tensor.
void walk(Localisation& l, const Case& c, const NamedD& observed, const Truth& truth, const CaseResult& r) {
    for (const auto& t : r.tensors) {
        if (!t.v.pass) {
            l.first_divergence = t.name;
            break;
        }
        l.conforming.push_back(t.name);
    }
    const TensorResult* t = tensor_of(r, l.first_divergence);
    const auto o = observed.find(l.first_divergence);
    const auto ref = truth.ref.find(l.first_divergence);
    if (!t || o == observed.end() || ref == truth.ref.end()) return;
    l.tensor = l.first_divergence;
    l.worst = t->v.m.worst.str();
    l.patterns = patterns(o->second, ref->second, t->v.allowed, shape_of(c, l.tensor));
}

}  // namespace

Localisation localise(const Case& c, DType dtype, const NamedD& observed, const Truth& truth,
                      const CaseResult& failed, Implementation* impl) {
    Localisation l;
    if (c.op != Op::decode) {
        l.walked = c.op == Op::block ? "block taps in data-flow order" : "";
        walk(l, c, observed, truth, failed);
        if (c.op != Op::block) l.first_divergence.clear(), l.conforming.clear();
        return l;
    }

    // Decode has only "out": which tokens diverge tells prefill from decode
    // steps; the implementation's own block() on the same tokens (which decode
    // must equal) has taps to walk.
    const TensorResult* t = tensor_of(failed, "out");
    const auto o = observed.find("out");
    const auto ref = truth.ref.find("out");
    std::string token_line;
    if (t && o != observed.end() && ref != truth.ref.end()) {
        const auto by_token =
            max_by(o->second, ref->second, ref->second.rows(), [](int64_t r, int64_t) { return r; });
        const auto bad = over(by_token, t->v.allowed);
        if (!bad.empty()) {
            const int64_t first = bad.front();
            const std::string prefill =
                c.prefill == 1 ? "token 0" : fmt::format("tokens 0-{}", c.prefill - 1);
            token_line =
                first < c.prefill
                    ? fmt::format("decode out diverges from token {}, inside the prefill ({})", first, prefill)
                    : fmt::format("decode out diverges from token {}, decode step {} ({})", first, first - c.prefill,
                                  c.prefill > 0 ? "the prefill, " + prefill + ", conforms"
                                                : "no prefill: every token is a decode step");
        }
    }
    if (impl) {
        Case bc = c;
        bc.op = Op::block;
        bc.prefill = 0;
        declared_for(bc, *impl);
        const ImplOutputs bo = run_impl(*impl, bc);
        if (bo.error.empty()) {
            const Truth bt = reference_truth(bc, dtype);
            const CaseResult br = judge_case(bc, dtype, bo.outputs, bt);
            if (br.pass) {
                l.first_divergence = "the decode path (KV cache or decode-step positions)";
                l.walked = "the implementation's block() on the same tokens conforms at every tap";
            } else {
                l.walked = "the implementation's block() on the same tokens, taps in data-flow order";
                walk(l, bc, bo.outputs, bt, br);
            }
        }
    }
    if (l.tensor.empty() && t && o != observed.end() && ref != truth.ref.end()) {
        l.tensor = "decode out";
        l.worst = t->v.m.worst.str();
        l.patterns = patterns(o->second, ref->second, t->v.allowed, shape_of(c, "out"));
    }
    if (!token_line.empty()) l.patterns.insert(l.patterns.begin(), token_line);
    return l;
}

}  // namespace conform::diagnose
