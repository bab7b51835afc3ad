// HDF5's error stack and type names in our words (handle.h).
#include "h5/handle.h"

namespace conform::h5 {

std::string last_error() {
    struct Walk {
        std::string msg;
    } w;
    // Upward: from where the library detected the problem to the API call;
    // the innermost description is the one that says what is wrong.
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_UPWARD,
        [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
            auto* w = static_cast<Walk*>(data);
            if (w->msg.empty() && e->desc && *e->desc) w->msg = e->desc;
            return 0;
        },
        &w);
    H5Eclear2(H5E_DEFAULT);
    return w.msg;
}

std::string type_name(hid_t type) {
    const size_t bits = H5Tget_size(type) * 8;
    switch (H5Tget_class(type)) {
        case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
        case H5T_FLOAT: return "float" + std::to_string(bits);
        case H5T_STRING: return "string";
        case H5T_ENUM: return "enum";
        case H5T_COMPOUND: return "compound";
        case H5T_ARRAY: return "array";
        case H5T_VLEN: return "variable-length sequence";
        case H5T_OPAQUE: return "opaque";
        case H5T_REFERENCE: return "reference";
        case H5T_BITFIELD: return "bitfield";
        case H5T_TIME: return "time";
        default: return "unknown type";
    }
}


std::string because() {
    const std::string e = last_error();
    return e.empty() ? "" : " (HDF5: " + e + ")";
}

}  // namespace conform::h5
