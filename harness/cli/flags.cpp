// The flags gate, coverage, bench and list share: declared here, resolved in
// harness/run/resolve.h.
#include "cli/flags.h"

#include <sched.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace conform::cli {

namespace {

CLI::Validator finite_number(bool zero_allowed) {
    return CLI::Validator(
        [zero_allowed](std::string& text) -> std::string {
            char* end = nullptr;
            errno = 0;
            const long double v = std::strtold(text.c_str(), &end);
            const bool whole = !text.empty() && end == text.c_str() + text.size() && errno == 0;
            if (!whole || !std::isfinite(v) || v < 0 || (!zero_allowed && v == 0))
                return std::string("expected a finite number ") + (zero_allowed ? ">= 0" : "> 0") + ", found '" +
                       text.substr(0, 40) + "'";
            return "";
        },
        zero_allowed ? "NUMBER>=0" : "NUMBER>0");
}

}  // namespace

CLI::Validator nonnegative() { return finite_number(true); }
CLI::Validator positive() { return finite_number(false); }

CLI::Validator seed_text() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            if (text == "random" || (!text.empty() && text.size() <= 20 &&
                                     text.find_first_not_of("0123456789") == std::string::npos))
                return "";
            return "expected a number or 'random', found '" + text.substr(0, 40) + "'";
        },
        "SEED");
}

void add_blas_core_flag(CLI::App& app, std::string& mode) {
    app.add_option("--blas-core", mode,
                   "OpenBLAS core for LibTorch's matmul: auto (replace a generic core DYNAMIC_ARCH fell back to by the "
                   "best this CPU runs, verified first; the default, which keeps OPENBLAS_CORETYPE where it is set), keep "
                   "(OpenBLAS's own pick), or a core's name (e.g. Haswell, SkylakeX)");
}

CLI::Validator machine_threads() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            long long n = -1;
            size_t used = 0;
            try {
                n = std::stoll(text, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != text.size() || n < 0) return "expected a count of threads >= 0, found '" + text + "'";
            cpu_set_t set;
            CPU_ZERO(&set);
            const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
            if (n > cpus)
                return "expected at most " + std::to_string(cpus) + " (the CPUs this process may run on), found " + text;
            return "";
        },
        "THREADS");
}

void add_case_flags(CLI::App& app, CaseFlags& f) {
    app.add_option("--impl", f.impls, "implementations, comma-separated, or 'all' (default and 'all': every available one but those run only when named, e.g. scalar-q8_0)");
    app.add_option("--op", f.ops, "ops, comma-separated, or 'all': " + op_names());
    app.add_option("--cases", f.cases, "property cases per op (default 100; 10 at full size: --weights, --full-size)")
        ->check(nonnegative());
    app.add_option("--seed", f.seed,
                   "seed for property cases and for which worker calls are repeated, or 'random' (default: a "
                   "fixed seed, printed)")
        ->check(seed_text());
    app.add_option("--dtype", f.dtype, "dtype the implementations run in: f32, bf16, f16 (default f32)");
    app.add_option("--params", f.params,
                   "only cases whose canonical id matches this regex (e.g. 'layout=interleaved'; ECMAScript syntax with lookaheads, without back-references or lookbehinds, matched in bounded time: docs/inputs.md); property cases "
                   "are drawn until --cases match");
    app.add_option("--shard", f.shard,
                   "run shard INDEX/TOTAL of the cases (0-based; or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS); "
                   "`conform merge-reports` joins the shards' reports");
    app.add_option("--case", f.case_id, "replay one property case by its canonical id, e.g. 'rope(T=7,...)'");
    app.add_option("--fixtures", f.fixtures,
                   "fixture files or directories (HDF5, fixtures/SCHEMA.md; directories recursively), comma-separated "
                   "or repeated; replaces the default fixtures/")
        ->delimiter(',');
    app.add_flag("--no-default-fixtures", f.no_default_fixtures, "do not run the repo's fixtures/ regression set");
    app.add_option("--fixture-case", f.fixture_case, "run only the fixture case(s) whose group has this name");
    // --preset / --config / overrides: property cases in that model's
    // conventions and head geometry; the repo's fixtures, of other models,
    // then run only when named (--fixtures).
    config::add_config_options(app, f.model,
                               "Property cases then take the model's conventions (layout, theta, scaling, rotary dim, "
                               "QK-norm, eps) and heads, kv heads, head_dim; d_model and ffn are divided by a power "
                               "of two down to d_model <= 256 so that 100 cases stay fast (--full-size: not divided); "
                               "tokens, positions and inputs are still drawn. The repo's fixtures then run only when "
                               "named (--fixtures). With --weights, the checkpoint is the model: --config names its "
                               "config.json, and --layout, --theta, --eps, --qk-norm override its conventions",
                               /*with_layers=*/false);
    CLI::Option_group* g = app.add_option_group(
        "real checkpoints", "a model's own weights at full size (docs/checkpoints.md; harness/weights/)");
    g->add_option("--weights", f.weights,
                  "a checkpoint: a .gguf file, a .safetensors file, or a directory of safetensors shards with its "
                  "config.json. Property cases take its configuration at full size and a layer's real weights; "
                  "tokens, positions and inputs are still drawn and shrunk (--inputs model: the real stream)");
    g->add_option("--layer", f.layers, "the checkpoint layer N the cases take (default 0)");
    g->add_option("--layers", f.layers, "checkpoint layers: all, A-B or N, one at a time");
    g->add_option("--inputs", f.inputs,
                  "drawn (the default) or model: the layer's real residual stream, the reference's float64 "
                  "forward of --tokens through the layers before it, and each op's real inputs from it")
        ->check(CLI::IsMember({"drawn", "random", "model"}));
    g->add_option("--tokens", f.tokens, "--inputs model: the token ids, comma-separated (default: a fixed random sequence)");
    g->add_option("--token-count", f.token_count, "--inputs model: the length of the default sequence (default 64)")
        ->check(positive());
    f.o_positions = g->add_option("--positions", f.positions, "--inputs model: the position of the first token (default 0)")
                        ->check(nonnegative());
    g->add_flag("--full-size", f.full_size,
                "--preset / --config: the property cases at the model's own d_model and ffn, not divided down");
    g->add_option("--max-rows", f.max_rows,
                  "at full size, tokens per case of the ops with weights (block, decode, swiglu) at most N (default 64)")
        ->check(positive());
}

void add_worker_flags(CLI::App& app, WorkerFlags& f, bool gate) {
    app.add_option("--impl-lib", f.impl_libs,
                   "an out-of-tree implementation: a shared library built against conform/plugin.h (repeatable); it "
                   "runs in a sandboxed worker process, never inside conform. Its name is usable in --impl; without "
                   "--impl only the workers run")
        ->allow_extra_args(false);
    app.add_option("--impl-cmd", f.impl_cmds,
                   "an out-of-tree implementation: a command speaking the worker protocol (impls/WORKERS.md), e.g. "
                   "'python3 my_kernels.py' (repeatable); started once, in its own sandboxed process group")
        ->allow_extra_args(false);
    app.add_option("--impl-fd", f.impl_fds,
                   "READ,WRITE: a worker conform does not start: the process that started conform serves the worker "
                   "protocol on these two inherited descriptors (conform reads answers from READ, writes calls to "
                   "WRITE; python/conform's check() does this). No sandbox, limits or restart: after it crashes, "
                   "hangs or breaks the protocol its later cases are not run (impls/WORKERS.md)")
        ->allow_extra_args(false);
    app.add_option("--call-timeout", f.call_timeout_s,
                   "seconds a worker may take for one call before the case fails and the worker is restarted (default 120)")
        ->check(positive());
    app.add_option("--worker-memory", f.memory_gb,
                   "address-space limit of each worker process in GB (default: none for --impl-cmd, which may map a GPU; "
                   "16 or half this machine's memory for --impl-lib)")
        ->check(nonnegative());
    app.add_option("--worker-cpu", f.cpu_s, "CPU-time limit of each worker process in seconds (default 3600; 0: none)")
        ->check(nonnegative());
    if (!gate) return;
    app.add_flag("--isolate", f.isolate,
                 "run the in-repo implementations in worker processes too (plugins and commands always are), so a "
                 "crash in one fails its case instead of ending conform");
    app.add_flag("--no-isolate", f.no_isolate, "(refused: plugins always run in a worker process)");
}

}  // namespace conform::cli
