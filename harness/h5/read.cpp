// Reading fixture files, with an error for every way a file can be wrong
// (fixtures/SCHEMA.md); damaged files are tried in a child process first.
#include "h5/fixture.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <functional>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <type_traits>

#include "core/child.h"
#include "h5/handle.h"
#include "h5/schema.h"

namespace conform::h5 {

namespace fs = std::filesystem;

namespace {

// ============================================================================
// Reading
// ============================================================================

// Where we are in a file, for messages: "file: field: msg" or
// "file:/case: field: msg".
// Where the reading is, in a page the parent shares with the child that
// reads first (read_guarded): a child that hangs is refused naming the
// object it hung on. Null outside such a read.
thread_local char* t_reading = nullptr;
constexpr size_t kReadingBytes = 256;
// What the child that reads a file first may allocate: a tensor is at most
// 2^28 elements (2 GiB as float64), a file a few of them.
constexpr int64_t kReadMemory = int64_t{8} << 30;

struct Ctx {
    std::string file;
    std::string group;

    // Marks the object about to be read (for a refusal on a timeout).
    void reading(const std::string& field) const {
        if (!t_reading) return;
        const std::string at = group.empty() ? field : group + "/" + field;
        const size_t n = std::min(at.size(), kReadingBytes - 1);
        std::memcpy(t_reading, at.data(), n);
        t_reading[n] = '\0';
    }

    [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
        std::string where = group.empty() ? file : file + ":/" + group;
        throw InputError(where + ": " + (field.empty() ? "" : field + ": ") + msg);
    }
    // HDF5's own words, when it has any, after ours.
    static std::string because() { return h5::because(); }
    hid_t check(hid_t id, const std::string& field, const std::string& what) const {
        if (id < 0) fail(field, what + because());
        return id;
    }
    void check_status(herr_t s, const std::string& field, const std::string& what) const {
        if (s < 0) fail(field, what + because());
    }
};

std::string op_list() {
    std::string s;
    for (Op op : kAllOps) s += (s.empty() ? "" : ", ") + std::string(to_string(op));
    return s;
}

bool link_exists(const Ctx& ctx, hid_t loc, const std::string& name, const std::string& field) {
    ctx.reading(field);
    const htri_t e = H5Lexists(loc, name.c_str(), H5P_DEFAULT);
    if (e < 0) ctx.fail(field, "cannot look it up" + Ctx::because());
    return e > 0;
}

// The object's kind behind a link (group, dataset, named datatype). Links
// into other files are refused, not followed: a fixture is one file.
H5I_type_t kind_of(const Ctx& ctx, hid_t loc, const std::string& name, const std::string& field) {
    ctx.reading(field);
    H5L_info_t info;
    if (H5Lget_info(loc, name.c_str(), &info, H5P_DEFAULT) < 0) ctx.fail(field, "cannot look it up" + Ctx::because());
    if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_SOFT)
        ctx.fail(field, "is a link to another file (not followed)");
    Object o(ctx.check(H5Oopen(loc, name.c_str(), H5P_DEFAULT), field, "cannot open"));
    return H5Iget_type(o.get());
}

Group open_group(const Ctx& ctx, hid_t loc, const std::string& name, const std::string& field) {
    if (kind_of(ctx, loc, name, field) != H5I_GROUP) ctx.fail(field, "expected a group, found another kind of object");
    return Group(ctx.check(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), field, "cannot open group"));
}

// ---- attributes -------------------------------------------------------------

bool has_attr(const Ctx& ctx, hid_t obj, const std::string& name, const std::string& field) {
    ctx.reading(field);
    const htri_t e = H5Aexists(obj, name.c_str());
    if (e < 0) ctx.fail(field, "cannot look it up" + Ctx::because());
    return e > 0;
}

// An attribute holding one value: scalar, or a one-element array (numpy writes
// both, depending on whether it was given a scalar or a length-1 array).
Attribute open_single(const Ctx& ctx, hid_t obj, const std::string& name, const std::string& field) {
    ctx.reading(field);
    Attribute a(ctx.check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), field, "cannot open attribute"));
    Dataspace s(ctx.check(H5Aget_space(a.get()), field, "cannot read its dataspace"));
    const H5S_class_t cls = H5Sget_simple_extent_type(s.get());
    if (cls == H5S_SCALAR) return a;
    if (cls == H5S_SIMPLE) {
        const hssize_t n = H5Sget_simple_extent_npoints(s.get());
        if (n == 1) return a;
        ctx.fail(field, "expected a single value, found " + std::to_string(n) + " values");
    }
    if (cls == H5S_NULL) ctx.fail(field, "has no value (null dataspace)");
    ctx.fail(field, "unreadable dataspace" + Ctx::because());
}

std::string read_string(const Ctx& ctx, hid_t obj, const std::string& name, const std::string& field) {
    Attribute a = open_single(ctx, obj, name, field);
    Datatype ft(ctx.check(H5Aget_type(a.get()), field, "cannot read its type"));
    if (H5Tget_class(ft.get()) != H5T_STRING) ctx.fail(field, "expected a string, found " + type_name(ft.get()));
    const htri_t variable = H5Tis_variable_str(ft.get());
    if (variable < 0) ctx.fail(field, "unreadable string type" + Ctx::because());
    Datatype mt(ctx.check(H5Tcopy(H5T_C_S1), field, "H5Tcopy"));
    H5Tset_cset(mt.get(), H5Tget_cset(ft.get()));
    if (variable > 0) {
        // h5py's default: a variable-length string, allocated by HDF5.
        ctx.check_status(H5Tset_size(mt.get(), H5T_VARIABLE), field, "H5Tset_size");
        char* p = nullptr;
        ctx.check_status(H5Aread(a.get(), mt.get(), &p), field, "cannot read");
        std::string s = p ? std::string(p) : std::string();
        if (p) H5free_memory(p);
        return s;
    }
    const size_t n = H5Tget_size(ft.get());
    if (n == 0 || n > (size_t(1) << 20)) ctx.fail(field, "implausible string length " + std::to_string(n));
    ctx.check_status(H5Tset_size(mt.get(), n), field, "H5Tset_size");
    ctx.check_status(H5Tset_strpad(mt.get(), H5T_STR_NULLPAD), field, "H5Tset_strpad");
    std::vector<char> buf(n + 1, '\0');
    ctx.check_status(H5Aread(a.get(), mt.get(), buf.data()), field, "cannot read");
    std::string s(buf.data(), strnlen(buf.data(), n));
    if (H5Tget_strpad(ft.get()) == H5T_STR_SPACEPAD)
        while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

// A native integer of `size` bytes at `p`, as int64.
int64_t widen(const unsigned char* p, size_t size, bool is_signed) {
    auto get = [p](auto v) {
        std::memcpy(&v, p, sizeof v);
        return v;
    };
    switch (size) {
        case 1: return is_signed ? int64_t(get(int8_t{})) : int64_t(get(uint8_t{}));
        case 2: return is_signed ? int64_t(get(int16_t{})) : int64_t(get(uint16_t{}));
        case 4: return is_signed ? int64_t(get(int32_t{})) : int64_t(get(uint32_t{}));
        default: return get(int64_t{});
    }
}

int64_t read_int(const Ctx& ctx, hid_t obj, const std::string& name, const std::string& field) {
    Attribute a = open_single(ctx, obj, name, field);
    Datatype ft(ctx.check(H5Aget_type(a.get()), field, "cannot read its type"));
    const H5T_class_t cls = H5Tget_class(ft.get());
    if (cls == H5T_INTEGER) {
        int64_t v = 0;
        ctx.check_status(H5Aread(a.get(), H5T_NATIVE_INT64, &v), field, "cannot read");
        return v;
    }
    if (cls == H5T_ENUM) {
        // numpy bools arrive as an enum over int8 {FALSE, TRUE}; HDF5 does not
        // convert enums to integers, so read the native bytes and widen.
        Datatype super(ctx.check(H5Tget_super(ft.get()), field, "cannot read its base type"));
        const size_t size = H5Tget_size(ft.get());
        if (H5Tget_class(super.get()) == H5T_INTEGER && (size == 1 || size == 2 || size == 4 || size == 8)) {
            Datatype nt(ctx.check(H5Tget_native_type(ft.get(), H5T_DIR_ASCEND), field, "no native type"));
            unsigned char buf[8] = {};
            ctx.check_status(H5Aread(a.get(), nt.get(), buf), field, "cannot read");
            return widen(buf, size, H5Tget_sign(super.get()) != H5T_SGN_NONE);
        }
    }
    ctx.fail(field, "expected an integer (int64), found " + type_name(ft.get()));
}

double read_float(const Ctx& ctx, hid_t obj, const std::string& name, const std::string& field) {
    Attribute a = open_single(ctx, obj, name, field);
    Datatype ft(ctx.check(H5Aget_type(a.get()), field, "cannot read its type"));
    const H5T_class_t cls = H5Tget_class(ft.get());
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) ctx.fail(field, "expected a number (float64), found " + type_name(ft.get()));
    double v = 0;
    ctx.check_status(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v), field, "cannot read");
    return v;
}

// ---- datasets ---------------------------------------------------------------

enum class Want { float32, float_any, integer };

const char* want_str(Want w) {
    switch (w) {
        case Want::float32: return "float32";
        case Want::float_any: return "float64 (or float32)";
        case Want::integer: return "int64";
    }
    return "?";
}

struct Shape {
    std::vector<int64_t> dims;
    int64_t numel = 1;
};

// Opens a dataset and checks its rank, emptiness, size and element type; the
// data is read only once all of that holds.
Dataset open_dataset(const Ctx& ctx, hid_t g, const std::string& name, const std::string& field, int rank,
                     const std::string& layout, Want want, Shape& shape) {
    if (kind_of(ctx, g, name, field) != H5I_DATASET) ctx.fail(field, "expected a dataset, found another kind of object");
    Dataset ds(ctx.check(H5Dopen2(g, name.c_str(), H5P_DEFAULT), field, "cannot open dataset"));
    Dataspace sp(ctx.check(H5Dget_space(ds.get()), field, "cannot read its dataspace"));
    const H5S_class_t cls = H5Sget_simple_extent_type(sp.get());
    if (cls == H5S_NULL) ctx.fail(field, "empty (null dataspace); expected " + layout);
    if (cls == H5S_SCALAR) ctx.fail(field, "expected a " + std::to_string(rank) + "-D dataset " + layout + ", found a scalar");
    const int nd = H5Sget_simple_extent_ndims(sp.get());
    if (nd < 0 || nd > H5S_MAX_RANK) ctx.fail(field, "unreadable dataspace" + Ctx::because());
    hsize_t dims[H5S_MAX_RANK] = {};
    if (H5Sget_simple_extent_dims(sp.get(), dims, nullptr) < 0) ctx.fail(field, "unreadable dataspace" + Ctx::because());
    std::vector<int64_t> found;
    for (int i = 0; i < nd; ++i)
        found.push_back(dims[i] > hsize_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(dims[i]));
    if (nd != rank)
        ctx.fail(field, "expected a " + std::to_string(rank) + "-D dataset " + layout + ", found " + std::to_string(nd) +
                            "-D " + shape_str(found));
    shape.dims = found;
    shape.numel = 1;
    for (int64_t d : found) {
        if (d == 0) ctx.fail(field, "empty tensor (shape " + shape_str(found) + ")");
        if (d > kMaxElements / shape.numel)
            ctx.fail(field, "too large: shape " + shape_str(found) + " exceeds " + std::to_string(kMaxElements) +
                                " elements");
        shape.numel *= d;
    }
    // The data must be in this file and written: external storage is another
    // file (a FIFO there blocks the reader; a path anywhere reads what it
    // names), and a dataset declared but never written reads as its fill value
    // however large it says it is (a 60 KB file would read as gigabytes).
    {
        PropList dcpl(ctx.check(H5Dget_create_plist(ds.get()), field, "cannot read its creation properties"));
        const int external = H5Pget_external_count(dcpl.get());
        if (external != 0) ctx.fail(field, "stored in another file (HDF5 external storage), which is not read");
    }
    H5D_space_status_t written = H5D_SPACE_STATUS_ERROR;
    if (H5Dget_space_status(ds.get(), &written) < 0 || written != H5D_SPACE_STATUS_ALLOCATED)
        ctx.fail(field, std::string("declared but ") +
                            (written == H5D_SPACE_STATUS_PART_ALLOCATED ? "only partly written" : "never written") +
                            " (shape " + shape_str(found) + "): its values would be the fill value, not data");
    Datatype ft(ctx.check(H5Dget_type(ds.get()), field, "cannot read its type"));
    const H5T_class_t tc = H5Tget_class(ft.get());
    const size_t size = H5Tget_size(ft.get());
    const bool ok = (want == Want::integer && tc == H5T_INTEGER) ||
                    (want == Want::float32 && tc == H5T_FLOAT && size == 4) ||
                    (want == Want::float_any && tc == H5T_FLOAT && (size == 4 || size == 8));
    if (!ok) ctx.fail(field, std::string("wrong dtype: expected ") + want_str(want) + ", found " + type_name(ft.get()));
    return ds;
}

std::string layout_of(const std::string& name) { return is_vector_input(name) ? "[n]" : "[rows, cols]"; }

Tensor read_input(const Ctx& ctx, hid_t inputs, const std::string& name) {
    const std::string field = "inputs/" + name;
    const bool vec = is_vector_input(name);
    Shape s;
    Dataset ds = open_dataset(ctx, inputs, name, field, vec ? 1 : 2, layout_of(name), Want::float32, s);
    Tensor t(vec ? 1 : s.dims[0], vec ? s.dims[0] : s.dims[1]);
    ctx.check_status(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()), field,
                     "cannot read data");
    return t;
}

std::vector<int64_t> read_positions(const Ctx& ctx, hid_t inputs, const std::string& name) {
    const std::string field = "inputs/" + name;
    Shape s;
    Dataset ds = open_dataset(ctx, inputs, name, field, 1, "[T]", Want::integer, s);
    std::vector<int64_t> p(static_cast<size_t>(s.numel));
    ctx.check_status(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), field,
                     "cannot read data");
    return p;
}

DTensor read_expected(const Ctx& ctx, hid_t expected, const std::string& name) {
    const std::string field = "expected/" + name;
    Shape s;
    Dataset ds = open_dataset(ctx, expected, name, field, 2, "[rows, cols]", Want::float_any, s);
    DTensor t;
    t.shape = s.dims;
    t.data.resize(static_cast<size_t>(s.numel));
    ctx.check_status(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()), field,
                     "cannot read data");
    return t;
}

// ---- one case ---------------------------------------------------------------


// rope_scaling (+ the parameters its type takes) and rotary_dim; their values
// are checked with the rest of the case (validate_case).
void read_rope_extras(const Ctx& ctx, hid_t g, BlockConfig& cfg) {
    auto has = [&](const std::string& f) { return has_attr(ctx, g, f, "config/" + f); };
    RopeScaling& s = cfg.rope_scaling;
    if (has("rope_scaling")) {
        const std::string v = read_string(ctx, g, "rope_scaling", "config/rope_scaling");
        auto t = parse_rope_scaling_type(v);
        if (!t)
            ctx.fail("config/rope_scaling",
                     "expected \"none\", \"linear\", \"llama3\", \"yarn\" or \"dynamic\", found \"" + v + "\"");
        s.type = *t;
    }
    // Every scaling parameter of conform/config.h's table: present exactly when the type takes it.
    for_each_field(cfg, [&](const ConfigField& cf, auto& v) {
        if (!cf.is_scaling_param()) return;
        const std::string f = cf.h5;
        const bool wanted = cf.applies(s.type);
        const std::string field = "config/" + f;
        if (!has(f)) {
            if (wanted) ctx.fail(field, std::string("missing (rope_scaling \"") + to_string(s.type) + "\" needs it)");
            return;
        }
        if (!wanted)
            ctx.fail(field, std::string("does not apply to rope_scaling \"") + to_string(s.type) + "\"" +
                                (s.type == RopeScalingType::none ? " (absent: no scaling)" : ""));
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t>) {
            v = read_int(ctx, g, f, field);
        } else if constexpr (std::is_same_v<V, double>) {
            const double x = read_float(ctx, g, f, field);
            if (!std::isfinite(x)) ctx.fail(field, "must be finite, found " + std::to_string(x));
            v = x;
        }
    });
    if (has("rotary_dim")) cfg.rotary_dim = read_int(ctx, g, "rotary_dim", "config/rotary_dim");
}

void read_config(const Ctx& ctx, hid_t case_group, Op op, BlockConfig& cfg) {
    const std::vector<std::string> required = required_config(op);
    std::vector<std::string> present;
    if (link_exists(ctx, case_group, "config", "config")) {
        Group g = open_group(ctx, case_group, "config", "config");
        auto has = [&](const char* f) {
            const bool h = has_attr(ctx, g.get(), f, std::string("config/") + f);
            if (h) present.push_back(f);
            return h;
        };
        auto size = [&](const char* f, int64_t& out) {
            if (!has(f)) return;
            const std::string field = std::string("config/") + f;
            const int64_t v = read_int(ctx, g.get(), f, field);
            if (v < 1) ctx.fail(field, "must be > 0, found " + std::to_string(v));
            if (v > kMaxSize) ctx.fail(field, "implausibly large: " + std::to_string(v) + " (limit " + std::to_string(kMaxSize) + ")");
            out = v;
        };
        size("d_model", cfg.d_model);
        size("n_heads", cfg.n_heads);
        size("n_kv_heads", cfg.n_kv_heads);
        size("page_size", cfg.page_size);
        size("head_dim", cfg.head_dim);
        size("ffn_dim", cfg.ffn_dim);
        size("n_experts", cfg.n_experts);
        size("n_experts_per_tok", cfg.n_experts_per_tok);
        size("moe_ffn_dim", cfg.moe_ffn_dim);
        size("kv_lora_rank", cfg.kv_lora_rank);
        size("qk_nope_head_dim", cfg.qk_nope_head_dim);
        size("qk_rope_head_dim", cfg.qk_rope_head_dim);
        size("v_head_dim", cfg.v_head_dim);
        if (has("rope_layout")) {
            const std::string v = read_string(ctx, g.get(), "rope_layout", "config/rope_layout");
            auto l = parse_rope_layout(v);
            if (!l) ctx.fail("config/rope_layout", "expected \"neox\" or \"interleaved\", found \"" + v + "\"");
            cfg.rope_layout = *l;
        }
        if (has("rope_theta")) cfg.rope_theta = read_float(ctx, g.get(), "rope_theta", "config/rope_theta");
        if (has("qk_norm")) {
            const int64_t v = read_int(ctx, g.get(), "qk_norm", "config/qk_norm");
            if (v != 0 && v != 1) ctx.fail("config/qk_norm", "expected 0 or 1, found " + std::to_string(v));
            cfg.qk_norm = v == 1;
        }
        // The twists (conform/twists.h), each by its kind: a toggle 0 or 1, a
        // count or a number in its range, a choice by name; on only on an op
        // that reads it, and only where it applies.
        for (const Twist& t : twist_table()) {
            if (t.core || !has(t.h5)) continue;
            const std::string where = std::string("config/") + t.h5;
            double v = 0;
            std::optional<double> parsed;
            // (A toggle is stored 0 / 1 whatever ids and flags spell it.)
            const std::string expected =
                "expected " + (t.kind == TwistKind::toggle ? std::string("0 or 1") : twist_expected(t)) + ", found ";
            switch (t.kind) {
                case TwistKind::toggle:
                case TwistKind::count: {
                    const int64_t x = read_int(ctx, g.get(), t.h5, where);
                    const bool ok = t.kind == TwistKind::toggle ? x == 0 || x == 1 : x == 0 || (x >= t.lo && x <= t.hi);
                    if (!ok) ctx.fail(where, expected + std::to_string(x));
                    parsed = static_cast<double>(x);
                    break;
                }
                case TwistKind::number: {
                    const double x = read_float(ctx, g.get(), t.h5, where);
                    if (!std::isfinite(x) || x < 0 || (x != 0 && (x < t.lo || x > t.hi))) ctx.fail(where, expected + std::to_string(x));
                    parsed = x;
                    break;
                }
                case TwistKind::choice: {
                    const std::string x = read_string(ctx, g.get(), t.h5, where);
                    parsed = parse_twist_text(t, x, nullptr);
                    if (!parsed) ctx.fail(where, expected + "\"" + x.substr(0, 64) + "\"");
                    break;
                }
            }
            v = *parsed;
            BlockConfig probe = cfg;
            set_twist_value(t, probe, v);
            if (twist_on(t, probe) && !op_info(op).reads(t))
                ctx.fail(where, std::string("op ") + to_string(op) + " has " + t.lacks);
            cfg = probe;
        }
        if (has("norm_eps")) cfg.norm_eps = read_float(ctx, g.get(), "norm_eps", "config/norm_eps");
        read_rope_extras(ctx, g.get(), cfg);
        // (After the core's fields: a twist may apply only with one of them, as truncate with YaRN.)
        for (const Twist& t : twist_table())
            if (!t.core && t.applies && twist_on(t, cfg) && !t.applies(cfg))
                ctx.fail(std::string("config/") + t.h5, std::string("set where it does not apply (") + t.lacks + ")");
    } else if (!required.empty()) {
        std::string list;
        for (const auto& f : required) list += (list.empty() ? "" : ", ") + f;
        ctx.fail("config", std::string("missing group (op ") + to_string(op) + " needs " + list + ")");
    }
    for (const auto& f : required)
        if (std::find(present.begin(), present.end(), f) == present.end())
            ctx.fail("config/" + f, std::string("missing (op ") + to_string(op) + " needs it)");
}

Case read_case(const std::string& path, hid_t root, const std::string& name) {
    const Ctx ctx{path, name};
    Group g = open_group(ctx, root, name, "");
    Case c;
    c.file = path;
    c.group = name;
    c.id = fs::path(path).filename().string() + ":/" + name;

    if (!has_attr(ctx, g.get(), "op", "op")) ctx.fail("op", "missing attribute (one of: " + op_list() + ")");
    const std::string op_name = read_string(ctx, g.get(), "op", "op");
    const auto op = parse_op(op_name);
    if (!op) ctx.fail("op", "unknown op '" + op_name + "' (ops: " + op_list() + ")");
    c.op = *op;
    if (has_attr(ctx, g.get(), "description", "description"))
        c.description = read_string(ctx, g.get(), "description", "description");
    if (c.op == Op::decode) {
        if (!has_attr(ctx, g.get(), "prefill", "prefill"))
            ctx.fail("prefill", "missing attribute (op decode needs the number of tokens processed before one-at-a-time decoding)");
        c.prefill = read_int(ctx, g.get(), "prefill", "prefill");
    }

    read_config(ctx, g.get(), c.op, c.config);

    // qk_norm decides which inputs a block has, so the config comes first.
    if (!link_exists(ctx, g.get(), "inputs", "inputs")) ctx.fail("inputs", "missing group");
    Group in = open_group(ctx, g.get(), "inputs", "inputs");
    const std::string needs = std::string(" (op ") + to_string(c.op) + " needs it)";
    for (const auto& n : float_inputs(c.op, c.config)) {
        if (!link_exists(ctx, in.get(), n, "inputs/" + n)) ctx.fail("inputs/" + n, "missing dataset" + needs);
        c.inputs[n] = read_input(ctx, in.get(), n);
    }
    for (const auto& n : position_inputs(c.op)) {
        if (!link_exists(ctx, in.get(), n, "inputs/" + n)) ctx.fail("inputs/" + n, "missing dataset" + needs);
        c.positions[n] = read_positions(ctx, in.get(), n);
    }

    if (!link_exists(ctx, g.get(), "expected", "expected")) ctx.fail("expected", "missing group (needs at least 'out')");
    Group ex = open_group(ctx, g.get(), "expected", "expected");
    for (const auto& n : output_names(c.op)) {
        if (!link_exists(ctx, ex.get(), n, "expected/" + n)) {
            if (n == "out") ctx.fail("expected/out", "missing dataset (every case needs it)");
            continue;  // block taps are optional
        }
        c.expected[n] = read_expected(ctx, ex.get(), n);
    }

    validate_case(c);

    complete_config(c);  // so an implementation's supports() sees a complete config
    return c;
}

// Parses "conform-fixture/MAJOR[.MINOR]"; -1 when it is not that shape.
// A file that exists, is readable and is HDF5, opened read-only.
File open_file(const Ctx& ctx, const std::string& path) {
    std::error_code ec;
    const auto st = fs::status(path, ec);
    if (ec || !fs::exists(st)) ctx.fail("", "no such file");
    if (!fs::is_regular_file(st)) ctx.fail("", "not a regular file");
    if (::access(path.c_str(), R_OK) != 0) ctx.fail("", std::string("cannot read: ") + std::strerror(errno));
    const htri_t is = H5Fis_hdf5(path.c_str());
    if (is <= 0) ctx.fail("", "not an HDF5 file (no HDF5 signature)" + Ctx::because());
    PropList fapl(ctx.check(H5Pcreate(H5P_FILE_ACCESS), "", "H5Pcreate"));
#if H5_VERSION_GE(1, 10, 7)
    // Reading needs no lock, and locking fails on some network and read-only
    // file systems.
    H5Pset_file_locking(fapl.get(), false, true);
#endif
    return File(ctx.check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), "", "cannot open as HDF5 (corrupt or truncated?)"));
}

// A file opened for reading, and its root group.
struct OpenRoot {
    File file;
    Group root;
    hid_t get() const { return root.get(); }
};
OpenRoot open_root(const Ctx& ctx, const std::string& path) {
    File f = open_file(ctx, path);
    Group root(ctx.check(H5Gopen2(f.get(), "/", H5P_DEFAULT), "", "cannot open the root group"));
    return {std::move(f), std::move(root)};
}

std::string fmt_nonfinite(double v, int64_t row, int64_t col) {
    return std::string(std::isnan(v) ? "NaN" : "Inf") + " at [" + std::to_string(row) + ", " + std::to_string(col) + "]";
}

int schema_major(const std::string& s) {
    const std::string prefix = "conform-fixture/";
    if (s.compare(0, prefix.size(), prefix) != 0 || s.size() == prefix.size()) return -1;
    int major = 0;
    size_t i = prefix.size();
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
        major = major * 10 + (s[i] - '0');
        if (major > 1000000) return -1;
    }
    if (i == prefix.size()) return -1;
    if (i < s.size() && s[i] != '.') return -1;
    return major;
}

}  // namespace

std::vector<Case> read_fixture_in_process(const std::string& path) {
    const Ctx ctx{path, ""};
    Silence quiet;
    const OpenRoot root = open_root(ctx, path);

    if (!has_attr(ctx, root.get(), "conform_schema", "conform_schema"))
        ctx.fail("conform_schema", std::string("missing root attribute (expected \"") + kSchema +
                                       "\"; is this a conform fixture?)");
    const std::string schema = read_string(ctx, root.get(), "conform_schema", "conform_schema");
    const int major = schema_major(schema);
    if (major < 0) ctx.fail("conform_schema", std::string("expected \"") + kSchema + "\", found \"" + schema + "\"");
    if (major != kSchemaMajor)
        ctx.fail("conform_schema", "schema \"" + schema + "\" is major version " + std::to_string(major) +
                                       "; this conform reads major version " + std::to_string(kSchemaMajor) + " (\"" +
                                       kSchema + "\")");

    // Every hard-linked top-level group is a case; other top-level objects are
    // ignored (forward compatibility), and links to elsewhere are never followed.
    std::vector<std::string> names;
    const herr_t it = H5Literate(
        root.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
        [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
            if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(name);
            return 0;
        },
        &names);
    if (it < 0) ctx.fail("", "cannot list the file's cases" + Ctx::because());

    std::vector<Case> cases;
    for (const auto& n : names) {
        const Ctx cctx{path, n};
        if (kind_of(cctx, root.get(), n, "") != H5I_GROUP) continue;
        cases.push_back(read_case(path, root.get(), n));
    }
    if (cases.empty()) ctx.fail("", "no cases (a case is a top-level group)");
    return cases;
}


// The root's token_ids [T] (required) and positions [T] (optional), of a
// logits or a hidden file.
void read_tokens(const Ctx& ctx, hid_t root, std::vector<int64_t>& ids, std::vector<int64_t>& positions) {
    auto ints = [&](const std::string& name) {
        Shape s;
        Dataset ds = open_dataset(ctx, root, name, name, 1, "[T]", Want::integer, s);
        std::vector<int64_t> v(static_cast<size_t>(s.numel));
        ctx.check_status(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), name,
                         "cannot read data");
        return v;
    };
    if (!link_exists(ctx, root, "token_ids", "token_ids")) ctx.fail("token_ids", "missing dataset (int64 [T])");
    ids = ints("token_ids");
    if (link_exists(ctx, root, "positions", "positions")) positions = ints("positions");
}

// A float dataset [T, cols] read as float64: one row per token id, finite;
// `cols` > 0: exactly that many columns.
DTensor read_rows(const Ctx& ctx, hid_t root, const std::string& name, const std::string& layout, int64_t T, int64_t cols) {
    Shape s;
    Dataset ds = open_dataset(ctx, root, name, name, 2, layout, Want::float_any, s);
    if (s.dims[0] != T || (cols > 0 && s.dims[1] != cols))
        ctx.fail(name, "expected shape [" + std::to_string(T) + ", " + (cols > 0 ? std::to_string(cols) : "n") +
                           "] (one row per token id), found " + shape_str(s.dims));
    DTensor t;
    t.shape = s.dims;
    t.data.resize(static_cast<size_t>(s.numel));
    ctx.check_status(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()), name,
                     "cannot read data");
    for (size_t i = 0; i < t.data.size(); ++i)
        if (!std::isfinite(t.data[i]))
            ctx.fail(name, fmt_nonfinite(t.data[i], static_cast<int64_t>(i) / s.dims[1], static_cast<int64_t>(i) % s.dims[1]));
    return t;
}

static LogitsFile read_logits_in_process(const std::string& path) {
    const Ctx ctx{path, ""};
    Silence quiet;
    const OpenRoot root = open_root(ctx, path);
    LogitsFile l;
    read_tokens(ctx, root.get(), l.token_ids, l.positions);
    // An engine's file names its logits `logits`; conform's own, `reference`.
    const std::string name = link_exists(ctx, root.get(), "logits", "logits") ? "logits" : "reference";
    if (!link_exists(ctx, root.get(), name, name)) ctx.fail("logits", "missing dataset (float [T, vocab]; or `reference`)");
    l.reference = read_rows(ctx, root.get(), name, "[T, vocab]", static_cast<int64_t>(l.token_ids.size()), 0);
    return l;
}

static HiddenFile read_hidden_in_process(const std::string& path) {
    const Ctx ctx{path, ""};
    Silence quiet;
    const OpenRoot root = open_root(ctx, path);
    HiddenFile h;
    read_tokens(ctx, root.get(), h.token_ids, h.positions);
    const int64_t T = static_cast<int64_t>(h.token_ids.size());
    auto matrix = [&](const std::string& name, int64_t D) { return read_rows(ctx, root.get(), name, "[T, D]", T, D); };
    if (!link_exists(ctx, root.get(), "layers", "layers")) ctx.fail("layers", "missing group (layers/0/attn_residual, ...)");
    int64_t D = 0;
    for (int64_t l = 0;; ++l) {
        const std::string g = "layers/" + std::to_string(l);
        if (!link_exists(ctx, root.get(), g, g)) break;
        for (const char* what : {"attn_residual", "out"})
            if (!link_exists(ctx, root.get(), g + "/" + what, g + "/" + what))
                ctx.fail(g + "/" + what, "missing dataset (float [T, D])");
        h.attn_residual.push_back(matrix(g + "/attn_residual", D));
        D = h.attn_residual.back().cols();
        h.out.push_back(matrix(g + "/out", D));
    }
    if (h.attn_residual.empty()) ctx.fail("layers/0", "missing group: the file holds no layer");
    if (has_attr(ctx, root.get(), "producer", "producer")) h.producer = read_string(ctx, root.get(), "producer", "producer");
    return h;
}

namespace {

// HDF5 1.10 is not memory-safe on damaged files whose metadata carries no
// checksums (h5py's default format): fuzz_fixtures found H5HG_read copying
// past its buffer for a corrupt variable-length string, and an edited
// global-heap reference crashes it. So every file conform is given is read
// first in a forked child (core/child.h); only when that child finishes is it
// read here. A crash, or a loop, costs the child, and the file is refused.
// The child's answer: "" (sound) or our message. `what`: "a fixture",
// "--expect-logits", ...
template <typename T>
T read_guarded(const std::string& path, double timeout_s, const char* what, const std::function<T()>& read) {
    if (timeout_s <= 0) {
        std::error_code ec;
        const auto bytes = fs::file_size(path, ec);
        timeout_s = 10.0 + (ec ? 0.0 : static_cast<double>(bytes) / 20e6);
    }
    // The child writes where it is into a shared page (Ctx::reading).
    void* page = ::mmap(nullptr, kReadingBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct Unmap {
        void* p;
        ~Unmap() {
            t_reading = nullptr;
            if (p != MAP_FAILED) ::munmap(p, kReadingBytes);
        }
    } unmap{page};
    const std::string at_start = "(the file's first object)";
    if (page != MAP_FAILED) std::memcpy(page, at_start.c_str(), at_start.size() + 1);
    const child::ChildResult r = child::run_in_child(
        [&] {
            if (page != MAP_FAILED) t_reading = static_cast<char*>(page);
            try {
                (void)read();
            } catch (const InputError& e) {
                return std::string("E") + e.what();
            }
            return std::string();
        },
        child::Options{timeout_s, true, kReadMemory});
    switch (r.kind) {
        case child::ChildResult::returned:
            if (r.text.empty()) return read();
            throw InputError(r.text.substr(1));
        case child::ChildResult::threw:
            if (r.text.find("bad_alloc") != std::string::npos)
                throw InputError(path + ": reading it (" + what + ") needed more than " +
                                 std::to_string(kReadMemory >> 30) + " GiB; refused");
            throw InputError(path + ": cannot be read: " + r.text);
        case child::ChildResult::fork_failed: return read();
        case child::ChildResult::timed_out: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", timeout_s);
            const std::string at = page != MAP_FAILED ? std::string(static_cast<const char*>(page)) : "";
            throw InputError(path + ": " + (at.empty() ? "" : at + ": ") + "reading it (" + what +
                             ") took more than " + buf +
                             " s; refused as corrupt (a sound file of its size reads in a fraction of that)");
        }
        case child::ChildResult::crashed: {
            const std::string at = page != MAP_FAILED ? std::string(static_cast<const char*>(page)) : "";
            throw InputError(path + ": " + (at.empty() ? "" : at + ": ") + "corrupt: the HDF5 library crashed reading it (" +
                             what + ", " + strsignal(r.code) + ")");
        }
        case child::ChildResult::exited:
            throw InputError(path + ": corrupt: the HDF5 library exited reading it (" + what + ", exit status " +
                             std::to_string(r.code) + ")");
    }
    throw std::logic_error("read_guarded: an unknown child result");
}

}  // namespace

std::vector<Case> read_fixture(const std::string& path, double timeout_s) {
    return read_guarded<std::vector<Case>>(path, timeout_s, "a fixture", [&] { return read_fixture_in_process(path); });
}

LogitsFile read_logits(const std::string& path) {
    return read_guarded<LogitsFile>(path, 0, "logits", [&] { return read_logits_in_process(path); });
}

HiddenFile read_hidden(const std::string& path) {
    return read_guarded<HiddenFile>(path, 0, "hidden states", [&] { return read_hidden_in_process(path); });
}

}  // namespace conform::h5
