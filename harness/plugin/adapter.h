// harness/plugin/adapter.h — a loaded plugin library (conform/plugin.h, ABI
// 2; conform/plugin_v1.h, ABI 1.x) as an Implementation, hosted by
// conform-worker. Version 2's adapter takes each call whole (the config,
// every twist by name, the tensors by schema name); version 1's passes the
// fields its minor had and offers it only the twists that minor knew.
#pragma once

#include <memory>
#include <string>

#include "conform/impl.h"
#include "conform/plugin.h"
#include "conform/plugin_v1.h"

namespace conform::plugin {

struct Library {
    std::string path;    // as given to --impl-lib
    void* handle = nullptr;  // dlopen's; never closed (see library.cpp)
    uint32_t abi = CONFORM_PLUGIN_ABI_VERSION;
    const conform_plugin* table = nullptr;        // ABI 2: static storage in the library
    const conform_v1_plugin* table_v1 = nullptr;  // ABI 1.x
    std::string name;    // copied out of the table
    std::string description;
    uint32_t dtypes = 0;
};

std::unique_ptr<Implementation> make_adapter(std::shared_ptr<const Library> lib, DType dtype);

std::string status_name(int32_t code);
std::string ops_of(const Library& l);
std::string dtypes_of(const Library& l);
double last_kernel_seconds();
bool implements(const Library& l, Op op);
ActQuant declared_act_quant(const Library& l, Op op);
uint32_t dtype_code(DType d);

// The twists the library computes for `op` (conform/twists.h): version 2's
// table's list (its entries' errors: load errors, thrown as ImplError);
// version 1's, those its minor had fields for.
TwistSet declared_twists(const Library& l, Op op);

// ABI 1.x (adapter_v1.cpp, frozen).
bool implements_v1(const conform_v1_plugin& t, Op op);
ActQuant declared_act_quant_v1(const conform_v1_plugin& t, Op op);
TwistSet declared_twists_v1(const conform_v1_plugin& t, Op op);
std::unique_ptr<Implementation> make_adapter_v1(std::shared_ptr<const Library> lib, DType dtype);

}  // namespace conform::plugin
