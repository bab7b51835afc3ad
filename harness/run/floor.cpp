#include "run/floor.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "gen/gen.h"
#include "judge/judge.h"

namespace conform::run {

namespace {

// Positions of each row of the planted tensor (its op's first position input), or none.
const std::vector<int64_t>* row_positions(const Case& c) {
    for (const PositionSpec& p : op_info(c.op).positions)
        if (p.n == Dim::T) return &c.pos(p.name);
    return nullptr;
}

// The case with its last row (and, for attention, its last key) moved far,
// keeping positions increasing where the op requires it.
void move_last_far(Case& c, int64_t far) {
    for (const PositionSpec& p : op_info(c.op).positions) {
        auto& v = c.positions[p.name];
        if (v.empty()) continue;
        for (size_t i = 0; i + 1 < v.size(); ++i) v[i] = static_cast<int64_t>(i);
        v.back() = std::max<int64_t>(far, static_cast<int64_t>(v.size()));
    }
}

bool caught(const Case& c, DType dtype, const Truth& t, const std::string& name, int64_t i, double eps) {
    NamedD planted = t.ref;
    double& x = planted.at(name).data[static_cast<size_t>(i)];
    x += eps * std::abs(x);
    return !judge_case(c, dtype, planted, t).pass;
}

// The smallest ε that fails, by bisection in log space between 1e-9 and 1.
double floor_at(const Case& c, DType dtype, const Truth& t, const std::string& name, int64_t i) {
    double lo = -9, hi = 0;  // log10 ε
    if (!caught(c, dtype, t, name, i, 1.0)) return INFINITY;
    if (caught(c, dtype, t, name, i, 1e-9)) return 1e-9;
    for (int k = 0; k < 24; ++k) {
        const double mid = 0.5 * (lo + hi);
        (caught(c, dtype, t, name, i, std::pow(10.0, mid)) ? hi : lo) = mid;
    }
    return std::pow(10.0, hi);
}

double quantile(std::vector<double> v, double q) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(std::min<double>(v.size() - 1, std::floor(q * static_cast<double>(v.size()))))];
}

}  // namespace

std::vector<FloorRow> measure_floor(const FloorOptions& o) {
    std::vector<FloorRow> out;
    std::vector<Op> ops = o.ops;
    if (ops.empty()) ops.assign(kAllOps.begin(), kAllOps.end());
    for (DType dtype : o.dtypes)
        for (Op op : ops) {
            const bool has_pos = !op_info(op).positions.empty();
            std::vector<std::vector<double>> eps(has_pos ? 2 : 1);
            Rng rng{o.seed * 7919 + static_cast<uint64_t>(op)};
            for (int k = 0, drawn = 0; k < o.cases && drawn < 100 * o.cases; ++drawn) {
                // Inputs of magnitude 1: at 1e-3 the absolute rounding floor
                // 2u·0.3 decides, by design (harness/compare/tolerance.h).
                const gen::CaseSpec spec = gen::draw(op, o.seed, drawn);
                if (spec.mag != 1.0) continue;
                Case c = gen::materialize(spec);
                if (has_pos) {
                    if (c.in(op == Op::attention ? "q" : "x").rows() < 2) continue;  // no near row beside the far one
                    move_last_far(c, o.far);
                }
                ++k;
                if (!has_pos) ++k;
                round_inputs(c, dtype);
                const Truth t = reference_truth(c, dtype);
                const DTensor& ref = t.ref.at(o.tensor);
                const std::vector<int64_t>* pos = has_pos ? row_positions(c) : nullptr;
                const int64_t cols = ref.cols();
                for (int64_t r = 0; r < ref.rows(); ++r) {
                    int cls = 0;
                    if (pos) {
                        const int64_t p = (*pos)[static_cast<size_t>(r)];
                        if (p < 64) cls = 0;
                        else if (p >= 16384) cls = 1;
                        else continue;
                    }
                    double ss = 0;
                    for (int64_t j = 0; j < cols; ++j) ss += ref.data[r * cols + j] * ref.data[r * cols + j];
                    const double rms = std::sqrt(ss / static_cast<double>(cols));
                    std::vector<int64_t> candidates;
                    for (int64_t j = 0; j < cols; ++j)
                        if (std::abs(ref.data[r * cols + j]) >= rms && rms > 0) candidates.push_back(r * cols + j);
                    for (int e = 0; e < o.elements && !candidates.empty(); ++e) {
                        const int64_t i = candidates[static_cast<size_t>(rng.below(static_cast<int64_t>(candidates.size())))];
                        eps[static_cast<size_t>(cls)].push_back(floor_at(c, dtype, t, o.tensor, i));
                    }
                }
            }
            for (size_t cls = 0; cls < eps.size(); ++cls) {
                FloorRow row{op, dtype, !has_pos ? "all" : cls == 0 ? "pos < 64" : "pos >= 16384",
                             static_cast<int>(eps[cls].size()), quantile(eps[cls], 0.5), quantile(eps[cls], 0.9),
                             eps[cls].empty() ? NAN : *std::max_element(eps[cls].begin(), eps[cls].end())};
                out.push_back(row);
            }
        }
    return out;
}

}  // namespace conform::run
