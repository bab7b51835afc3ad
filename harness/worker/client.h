// harness/worker/client.h — the judge's side of the worker protocol
// (impls/WORKERS.md): a worker process seen as a conform::Implementation, so
// the gate, fixtures, diagnosis, reports and bench run it like an in-repo one.
//
// Three kinds of worker, one mechanism:
//   --impl-cmd 'CMD'   a command (Python, anything) speaking the protocol;
//   --impl-lib LIB.so  a C plugin, hosted by conform-worker (never loaded here);
//   --isolate          an in-repo implementation, hosted by conform-worker;
//   --impl-fd R,W      a worker conform did not start: the process that started
//                      conform serves on two inherited descriptors (python/conform:
//                      kernels answered from a pytest process).
// Every worker conform starts is started through conform-worker, which
// sandboxes itself (sandbox.h) before it loads the plugin or execs the
// command. An attached worker (--impl-fd) gets every defence of the call
// path below, but no sandbox, limits or restart: after it crashes, hangs or
// breaks the protocol, its later cases are declined (not run), not retried. The judge
// holds the reference, the baselines and the reports; the worker holds only
// the inputs of the call it is answering.
//
// Per call: inputs go down the pipe (the judge's copy is never shared);
// outputs come back into the judge's buffers only after the worker has
// answered; elements the worker left at this call's poison (drawn fresh per
// call) are not delivered, so the harness reports them unwritten; a random
// subset of calls is repeated and must agree bit for bit ("nondeterministic"
// otherwise). A crash, an exit, a hang past the call timeout, a frame that
// breaks the protocol, a wrong name, dtype or shape: the call throws
// ImplError with the reason (a failed case), and the worker is restarted for
// the next call.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "conform/impl.h"
#include "worker/process.h"
#include "worker/protocol.h"
#include "worker/sandbox.h"

namespace conform::worker {

struct WorkerSpec {
    enum class Kind { command, plugin, builtin, attached } kind = Kind::command;
    // the command line, the library's path, the in-repo implementation's
    // name, or "R,W": the descriptors conform reads from and writes to
    std::string target;
    double call_timeout_s = 120;
    double start_timeout_s = 60;
    Limits limits;                  // memory 0: none (commands), or the plugin default
    double repeat_fraction = 0.125;  // calls repeated to check they are deterministic
    std::optional<uint64_t> seed;   // which calls are repeated, which poison is drawn (none: from the clock)

    std::string flag() const;  // "--impl-cmd 'CMD'", "--impl-lib PATH", "--isolate", "--impl-fd R,W"
};

// A worker that cannot be started or does not say hello properly. bad_input:
// the user gave something that is not a worker (a library that is not a
// conform plugin: exit 2); otherwise it is unavailable (exit 3).
struct StartError : std::runtime_error {
    StartError(const std::string& what, bool bad) : std::runtime_error(what), bad_input(bad) {}
    bool bad_input;
};

// What a worker said in its hello.
struct Hello {
    std::string name, description;
    std::vector<Op> ops;
    std::vector<DType> dtypes;
    bool supports = false;
    std::vector<Op> batch_invariant;  // ops whose rows do not depend on the batch, bit for bit (relations.h)
    Wire index_dtype = Wire::i64;     // how paged_attention's index arrays travel (i32: as FlashInfer and vLLM take them)
    // The FP8 caches each op keeps (paged_attention, decode; an op absent or
    // its list empty: offered no such case). The hello's list form is
    // paged_attention's, as it was before decode had a cache; its object
    // form, {"op": [...]}, names each op.
    std::map<Op, std::vector<KvCacheDtype>> kv_cache_dtypes;
    std::map<Op, ActQuant> activation_quant;    // what it does to its weight products' activations (absent: none)
    // The twists it computes, per op (conform/twists.h): the hello's `twists`
    // (a list for every op, or {"op": [...]}), and its kv_cache_dtypes. An op
    // absent: none (a worker that says nothing is offered the plain cases).
    std::map<Op, TwistSet> twists;
};

// conform-worker, beside the running conform (or $CONFORM_WORKER_BINARY).
std::string worker_binary();

class WorkerImpl final : public Implementation {
   public:
    // Starts the worker and reads its hello; throws StartError.
    static std::unique_ptr<WorkerImpl> start(const WorkerSpec& spec, DType dtype);
    ~WorkerImpl() override;

    const Hello& hello() const { return hello_; }
    const WorkerSpec& spec() const { return spec_; }
    struct Stats {
        int calls = 0, repeats = 0, restarts = 0;
        uint64_t bytes_sent = 0, bytes_received = 0;
        double worker_seconds = 0;  // the kernel's own time, as the worker reported it
        double last_worker_seconds = -1;
    };
    const Stats& stats() const { return stats_; }

    std::string name() const override { return hello_.name; }
    DType dtype() const override { return dtype_; }
    Support supports(Op op, const BlockConfig& config) const override;
    // The ops its hello lists.
    bool implements(Op op) const override {
        return std::find(hello_.ops.begin(), hello_.ops.end(), op) != hello_.ops.end();
    }
    // As its hello declares (a worker that says nothing: none).
    bool batch_invariant(Op op) const override {
        return std::find(hello_.batch_invariant.begin(), hello_.batch_invariant.end(), op) != hello_.batch_invariant.end();
    }
    // As its hello declares (absent: none).
    ActQuant activation_quant(Op op) const override {
        const auto it = hello_.activation_quant.find(op);
        return it == hello_.activation_quant.end() ? ActQuant::none : it->second;
    }
    // As its hello declares (absent: none).
    TwistSet twists(Op op) const override {
        const auto it = hello_.twists.find(op);
        return it == hello_.twists.end() ? TwistSet::none() : it->second;
    }
    // Every call whole: the config and the op's tensors by schema name, as
    // the op's row lists them (so a twist reaches a worker with no code here).
    bool call(Op op, const BlockConfig& c, CallTensors& t, TapSet& written) override;
    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override;
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override;
    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override;
    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override;
    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override;
    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override;
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override;
    void mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx, const MlaParams& p,
                       MutView out, MutView lse) override;

    struct State;  // the process, the ids, the random stream (client.cpp)

   private:
    struct Call;
    WorkerImpl(const WorkerSpec& spec, DType dtype);
    void invoke(Call& c);
    WorkerSpec spec_;
    DType dtype_;
    Hello hello_;
    mutable Stats stats_;
    std::unique_ptr<State> s_;
};

}  // namespace conform::worker
