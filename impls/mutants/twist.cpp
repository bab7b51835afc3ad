// The twists' mutants, generated from their rows (conform/twists.h): the
// scalar implementation called with the config a twist's bug computes — a
// kernel that ignores the twist (its field reset), or reads its value
// another way (a window one key short, a chunk read as a window) — instead
// of the case's. The other files of this folder hold the bugs no config edit
// expresses (a sink read per kv head, a cap taken after the mask, ...).
#include "mutants/mutants.h"

namespace conform::mutants {

namespace {

// The call's tensors as the edited config has them: a twist the bug drops
// drops its tensors too (a kernel without sinks never reads them).
struct AsEdited final : CallTensors {
    CallTensors& t;
    Op op;
    const BlockConfig& c;
    AsEdited(CallTensors& tensors, Op o, const BlockConfig& config) : t(tensors), op(o), c(config) {}
    View in(const char* name) override {
        const TensorSpec* s = op_info(op).input(name);
        return s && !s->present(c) ? View{} : t.in(name);
    }
    Positions pos(const char* name) override { return t.pos(name); }
    MutView out(const char* name) override { return t.out(name); }
    int64_t prefill() override { return t.prefill(); }
};

using Edit = std::function<std::optional<BlockConfig>(const BlockConfig&)>;

class ConfigEdit final : public scalar::ScalarImpl {
   public:
    ConfigEdit(std::string id, Edit edit) : ScalarImpl(std::move(id)), edit_(std::move(edit)) {}
    bool call(Op op, const BlockConfig& c, CallTensors& t, TapSet& written) override {
        const std::optional<BlockConfig> e = edit_(c);
        const BlockConfig& as = e ? *e : c;
        AsEdited tensors(t, op, as);
        written = op_info(op).invoke(*this, as, tensors);
        return true;
    }

   private:
    Edit edit_;
};

std::vector<Op> ops_reading(const Twist& t) {
    std::vector<Op> out;
    for (Op op : kAllOps)
        if (op_info(op).reads(t)) out.push_back(op);
    return out;
}

}  // namespace

std::vector<TwistMutant> twist_mutants() {
    std::vector<TwistMutant> out;
    for (const Twist& t : twist_table()) {
        const std::vector<Op> ops = ops_reading(t);
        if (t.ignored && t.ignored_mutant) {
            const Twist* row = &t;
            out.push_back({t.ignored, std::string(t.name) + " ignored: reset to its default wherever it is on", ops,
                           [row](const BlockConfig& c) -> std::optional<BlockConfig> {
                               if (!twist_on(*row, c)) return std::nullopt;
                               BlockConfig e = c;
                               reset_twist(*row, e);
                               return e;
                           }});
        }
        for (const TwistBug& b : t.bugs)
            for (size_t k = 0; k < b.mutants.size(); ++k) {
                if (!*b.mutants[k]) continue;
                const auto as = b.as;
                out.push_back({b.mutants[k], std::string(t.name) + " computed as its bug " + b.id + " does", ops,
                               [as, k](const BlockConfig& c) -> std::optional<BlockConfig> {
                                   const std::vector<BlockConfig> e = as(c);
                                   if (e.empty()) return std::nullopt;
                                   return e[std::min(k, e.size() - 1)];
                               },
                               b.id});
            }
    }
    return out;
}

std::unique_ptr<Implementation> make_twist_mutant(const TwistMutant& m, const ImplOptions& o) {
    if (o.dtype != DType::f32) throw ImplError(m.name + " runs float32 only, asked for " + to_string(o.dtype));
    return std::make_unique<ConfigEdit>(m.name, m.edit);
}

}  // namespace conform::mutants
