#include "h5/schema.h"

#include "conform/op_info.h"
#include "h5/fixture.h"

namespace conform::h5 {

// A vector is a [1, n] input of the op table (conform/op_info.h).
bool is_vector_input(const std::string& name) {
    for (const OpInfo& i : op_table())
        for (const TensorSpec& t : i.inputs)
            if (name == t.name) return t.rows == Dim::one;
    return false;
}

}  // namespace conform::h5
