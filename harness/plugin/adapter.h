// harness/plugin/adapter.h — a plugin's C table (conform/plugin.h) seen as a
// conform::Implementation, so the gate, fixtures, diagnosis, reports and
// bench run it like an in-repo implementation.
//
// It runs inside conform-worker (harness/worker/), never in the judge. The
// adapter only translates. Views become tensor descriptors in
// the run's dtype, status codes become ImplError, and the output buffers the
// harness guarded are handed straight to the plugin when the run is float32,
// so run_impl's poison and sentinels judge the plugin's own writes. In
// bfloat16 / float16 the plugin writes 16-bit staging buffers that carry the
// same kind of poison and sentinels, checked here. Crashes are the worker process's to have.
#pragma once

#include <memory>
#include <string>

#include "conform/impl.h"
#include "conform/plugin.h"

namespace conform::plugin {

// A loaded plugin library. Shared by every Implementation made from it.
struct Library {
    std::string path;                       // as given to --impl-lib
    void* handle = nullptr;                 // dlopen's; never closed (see loader.cpp)
    const conform_plugin* table = nullptr;  // static storage in the library
    std::string name;                       // copied out of the table
    std::string description;
};

// Throws ImplError when the plugin does not run in `dtype` (its table's dtypes).
std::unique_ptr<Implementation> make_adapter(std::shared_ptr<const Library> lib, DType dtype);

// "CONFORM_ERR_INVALID_ARGUMENT", or "status 42" for a code the ABI does not define.
std::string status_name(int32_t code);

// Op names a table implements, "rope, rmsnorm"; dtypes it runs in, "f32, bf16".
std::string ops_of(const conform_plugin& t);
std::string dtypes_of(const conform_plugin& t);

// Seconds the plugin's own function took in this thread's last call through
// an adapter: the kernel alone, without the adapter's conversions and checks
// (what conform-worker reports as a call's "seconds", and bench prints).
double last_kernel_seconds();

// Whether the table has a function for op.
bool implements(const conform_plugin& t, Op op);
// What the table declares for op's activations (ABI 1.7; before it, or
// without the function: none). Throws ImplError on an answer that is no
// CONFORM_ACT_QUANT_*.
ActQuant declared_act_quant(const conform_plugin& t, Op op);

// CONFORM_DTYPE_* for a DType.
uint32_t dtype_code(DType d);

}  // namespace conform::plugin
