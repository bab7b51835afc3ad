#include "plugin/isolate.h"

#include "core/child.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>
#include <vector>

namespace conform::isolate {

using child::page_size;
using child::round_up;
using child::SharedMapping;

namespace {

// ---- staged outputs -------------------------------------------------------------

constexpr uint32_t kSentinelBits = 0x7FA5A5A5u;  // the same pattern as run_impl's guard
constexpr size_t kFrontGuard = 64;                // sentinel floats before each output

// The outputs of one call, in one shared mapping laid out as
//   [no-access page] { [front sentinels][output][back sentinels to page end] [no-access page] }*
// so a write just outside an output hits its sentinels and a write further out
// faults in the child instead of landing in another output.
class StagedOutputs {
   public:
    struct Slot {
        std::string name;
        MutView dst;         // the harness's buffer
        size_t offset = 0;   // of the region (front sentinels) in the mapping
        size_t bytes = 0;    // of the region, excluding its fence page
    };

    explicit StagedOutputs(std::vector<std::pair<std::string, MutView>> outs) {
        const size_t page = page_size();
        size_t total = page;
        for (auto& [name, v] : outs) {
            Slot s;
            s.name = name;
            s.dst = v;
            s.offset = total;
            s.bytes = round_up((kFrontGuard + static_cast<size_t>(v.size()) + 1) * sizeof(float), page);
            total += s.bytes + page;
            slots_.push_back(std::move(s));
        }
        map_ = std::make_unique<SharedMapping>(total);
        fence(0);
        for (const Slot& s : slots_) {
            float* region = reinterpret_cast<float*>(map_->base() + s.offset);
            const size_t n_floats = s.bytes / sizeof(float);
            uint32_t* bits = reinterpret_cast<uint32_t*>(region);
            for (size_t i = 0; i < n_floats; ++i) bits[i] = kSentinelBits;
            std::memcpy(region + kFrontGuard, s.dst.data, static_cast<size_t>(s.dst.size()) * sizeof(float));
            fence(s.offset + s.bytes);
        }
    }

    MutView view(size_t i) const { return MutView{data(i), slots_[i].dst.rows, slots_[i].dst.cols}; }

    // "" when every sentinel is intact, else which output was overrun and where.
    std::string check() const {
        for (size_t k = 0; k < slots_.size(); ++k) {
            const Slot& s = slots_[k];
            const uint32_t* bits = reinterpret_cast<const uint32_t*>(map_->base() + s.offset);
            const size_t n = static_cast<size_t>(s.dst.size());
            const size_t n_floats = s.bytes / sizeof(float);
            for (size_t i = kFrontGuard; i-- > 0;)
                if (bits[i] != kSentinelBits)
                    return "wrote before the start of output '" + s.name + "' (element " +
                           std::to_string(static_cast<long long>(i) - static_cast<long long>(kFrontGuard)) +
                           " was overwritten)";
            for (size_t i = kFrontGuard + n; i < n_floats; ++i)
                if (bits[i] != kSentinelBits)
                    return "wrote past the end of output '" + s.name + "' (sentinel " +
                           std::to_string(i - kFrontGuard - n) + " after its " + std::to_string(n) +
                           " elements was overwritten)";
        }
        return "";
    }

    void copy_back() const {
        for (size_t k = 0; k < slots_.size(); ++k)
            std::memcpy(slots_[k].dst.data, data(k), static_cast<size_t>(slots_[k].dst.size()) * sizeof(float));
    }

   private:
    float* data(size_t i) const {
        return reinterpret_cast<float*>(map_->base() + slots_[i].offset) + kFrontGuard;
    }
    void fence(size_t offset) const {
        // Best effort: without the fence a far write is still caught if it lands on a sentinel.
        mprotect(map_->base() + offset, page_size(), PROT_NONE);
    }

    std::vector<Slot> slots_;
    std::unique_ptr<SharedMapping> map_;
};

// ---- the decorator ----------------------------------------------------------------

class Isolated final : public Implementation {
   public:
    Isolated(std::unique_ptr<Implementation> inner, const Options& o) : inner_(std::move(inner)), o_(o) {}

    std::string name() const override { return inner_->name(); }
    DType dtype() const override { return inner_->dtype(); }

    Support supports(Op op, const BlockConfig& config) const override {
        if (!o_.supports_too) return inner_->supports(op, config);
        const ChildResult r = run_in_child(
            [&] {
                const Support s = inner_->supports(op, config);
                return (s.ok ? "1" : "0") + s.reason;
            },
            o_.timeout_s);
        if (r.kind == ChildResult::returned && !r.text.empty())
            return r.text[0] == '1' ? Support::yes() : Support::no(r.text.substr(1));
        // Saying "no" here would silently skip the case; running it instead
        // fails it, with the op call's own report of what went wrong.
        return Support::yes();
    }

    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override {
        StagedOutputs so({{"out", out}});
        call("rmsnorm", so, [&] {
            inner_->rmsnorm(x, w, p, so.view(0));
            return std::string();
        });
    }

    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        StagedOutputs so({{"out", out}});
        call("rope", so, [&] {
            inner_->rope(x, pos, p, so.view(0));
            return std::string();
        });
    }

    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override {
        StagedOutputs so({{"out", out}});
        call("qk_norm", so, [&] {
            inner_->qk_norm(x, w, p, so.view(0));
            return std::string();
        });
    }

    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        StagedOutputs so({{"out", out}});
        call("attention", so, [&] {
            inner_->attention(q, k, v, q_pos, k_pos, p, so.view(0));
            return std::string();
        });
    }

    void swiglu(View x, View w1, View w3, View w2, MutView out) override {
        StagedOutputs so({{"out", out}});
        call("swiglu", so, [&] {
            inner_->swiglu(x, w1, w3, w2, so.view(0));
            return std::string();
        });
    }

    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        std::vector<std::pair<std::string, MutView>> staged;
        std::vector<Tap> which;
        for (Tap t : kAllTaps)
            if (out[t].data != nullptr) {
                staged.emplace_back(to_string(t), out[t]);
                which.push_back(t);
            }
        StagedOutputs so(std::move(staged));
        const std::string bits = call("block", so, [&] {
            BlockOutputs bo;
            for (size_t i = 0; i < which.size(); ++i) bo[which[i]] = so.view(i);
            return std::to_string(inner_->block(x, w, pos, c, bo).bits);
        });
        TapSet written;
        written.bits = static_cast<uint32_t>(std::stoul(bits));
        return written;
    }

    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        StagedOutputs so({{"out", out}});
        call("decode", so, [&] {
            inner_->decode(x, w, pos, prefill, c, so.view(0));
            return std::string();
        });
    }

   private:
    std::string call(const std::string& op, const StagedOutputs& so, const std::function<std::string()>& body) {
        const ChildResult r = run_in_child(body, o_.timeout_s);
        if (r.kind == ChildResult::threw) throw ImplError(r.text);
        if (r.kind != ChildResult::returned) throw ImplError(describe(r, op, o_.timeout_s));
        const std::string broke = so.check();
        if (!broke.empty()) throw ImplError(broke);
        so.copy_back();
        return r.text;
    }

    std::unique_ptr<Implementation> inner_;
    Options o_;
};

}  // namespace

std::unique_ptr<Implementation> isolated(std::unique_ptr<Implementation> inner, const Options& o) {
    return std::make_unique<Isolated>(std::move(inner), o);
}

}  // namespace conform::isolate
