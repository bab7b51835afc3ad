// Child processes (harness/core/child.h: a crash, exit, hang or exception
// comes back as such) and workers (harness/worker/: a call through the
// protocol comes back bitwise identical to the call in process; a worker
// that cannot start says why).
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <unistd.h>

#include "gen/gen.h"
#include "conform/dtype.h"
#include "core/child.h"
#include "worker/client.h"
#include "registry.h"
#include "judge/judge.h"

using namespace conform;

// The worker program this build made (the test binary is not beside it).
static const int kWorkerBinary = setenv("CONFORM_WORKER_BINARY", CONFORM_WORKER_BINARY, 0);

namespace {

std::unique_ptr<Implementation> scalar() {
    ImplOptions o;
    return find_implementation("scalar")->create(o);
}

}  // namespace

TEST_CASE("a child's result, exception, signal, exit and hang come back as such", "[plugin][child]") {
    using child::ChildResult;
    auto r = child::run_in_child([] { return std::string("fine"); }, 10);
    CHECK(r.kind == ChildResult::returned);
    CHECK(r.text == "fine");

    r = child::run_in_child([]() -> std::string { throw ImplError("rope: x must be [T, n*hd]"); }, 10);
    CHECK(r.kind == ChildResult::threw);
    CHECK(r.text == "rope: x must be [T, n*hd]");

    r = child::run_in_child([]() -> std::string { std::raise(SIGSEGV); return ""; }, 10);
    REQUIRE(r.kind == ChildResult::crashed);
    CHECK(r.code == SIGSEGV);
    CHECK(child::describe(r, "rope", 10).find("crashed with signal 11 (SIGSEGV) in rope") == 0);

    r = child::run_in_child([]() -> std::string { std::exit(3); }, 10);
    REQUIRE(r.kind == ChildResult::exited);
    CHECK(r.code == 3);

    const auto t0 = std::chrono::steady_clock::now();
    r = child::run_in_child([]() -> std::string { for (;;) pause(); }, 0.3);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(r.kind == ChildResult::timed_out);
    CHECK(waited < 5);
    CHECK(child::describe(r, "block", 0.3) == "timed out after 0.3 s in block and was killed");
}

namespace {

worker::WorkerSpec builtin(const std::string& name) {
    worker::WorkerSpec w;
    w.kind = worker::WorkerSpec::Kind::builtin;
    w.target = name;
    w.call_timeout_s = 30;
    w.repeat_fraction = 1.0;  // every call twice: the determinism check runs on every one
    return w;
}

}  // namespace

TEST_CASE("through a worker, an implementation's outputs and taps are bitwise its in-process ones", "[plugin][worker]") {
    auto plain = scalar();
    auto remote = worker::WorkerImpl::start(builtin("scalar"), DType::f32);
    CHECK(remote->name() == "scalar");
    for (Op op : kAllOps)
        for (int i = 0; i < 3; ++i) {
            const Case c = gen::materialize(gen::draw(op, 20261129, i));
            const ImplOutputs a = run_impl(*plain, c), b = run_impl(*remote, c);
            INFO(c.id);
            REQUIRE(a.error.empty());
            REQUIRE(b.error == "");
            REQUIRE(a.outputs.size() == b.outputs.size());
            for (const auto& [name, t] : a.outputs) {
                INFO(name);
                REQUIRE(b.outputs.count(name));
                CHECK(t.shape == b.outputs.at(name).shape);
                CHECK(t.data == b.outputs.at(name).data);
            }
        }
    CHECK(remote->stats().repeats == remote->stats().calls / 2);
    CHECK(remote->stats().restarts == 0);
}

TEST_CASE("a worker's bf16 tensors travel exactly, its outputs in bf16", "[plugin][worker]") {
    ImplOptions o;
    o.dtype = DType::bf16;
    auto plain = find_implementation("simd")->create(o);
    auto remote = worker::WorkerImpl::start(builtin("simd"), DType::bf16);
    for (Op op : {Op::rope, Op::block})
        for (int i = 0; i < 3; ++i) {
            Case c = gen::materialize(gen::draw(op, 7, i));
            round_inputs(c, DType::bf16);
            const ImplOutputs a = run_impl(*plain, c), b = run_impl(*remote, c);
            INFO(c.id);
            REQUIRE(a.error.empty());
            REQUIRE(b.error == "");
            // Outputs travel in the call's dtype (impls/WORKERS.md): simd's float32
            // residual stream arrives rounded to bf16, and is otherwise the same.
            std::vector<double> rounded = a.outputs.at("out").data;
            for (double& v : rounded) v = round_to(v, DType::bf16);
            CHECK(rounded == b.outputs.at("out").data);
        }
}

TEST_CASE("a worker that cannot start is a start error naming why", "[plugin][worker]") {
    worker::WorkerSpec w;
    w.kind = worker::WorkerSpec::Kind::command;
    w.target = "sh -c 'exit 7'";
    try {
        worker::WorkerImpl::start(w, DType::f32);
        FAIL("started");
    } catch (const worker::StartError& e) {
        CHECK_THAT(e.what(), Catch::Contains("exited with status 7 before its hello"));
        CHECK_FALSE(e.bad_input);
    }
    w.target = "echo garbage-not-a-frame; sleep 5";
    try {
        worker::WorkerImpl::start(w, DType::f32);
        FAIL("started");
    } catch (const worker::StartError& e) {
        CHECK_THAT(e.what(), Catch::Contains("frame: magic: expected 43 46 57 4b"));
    }
    w.kind = worker::WorkerSpec::Kind::plugin;
    w.target = "/nonexistent/libnothing.so";
    try {
        worker::WorkerImpl::start(w, DType::f32);
        FAIL("started");
    } catch (const worker::StartError& e) {
        CHECK_THAT(e.what(), Catch::Contains("/nonexistent/libnothing.so: no such file"));
        CHECK(e.bad_input);
    }
}
