// Fuzzing the fixture loader: valid fixtures of every op, damaged in bytes and
// in structure, must each either load and validate cleanly or be refused with
// an InputError naming the file — never a crash, a hang, a sanitizer report,
// or any other exception.
//
// Built with -fsanitize=address,undefined over its own copy of the loader and
// the case validation (tests/CMakeLists.txt), linked with neither torch nor
// the rest of the harness. It includes hdf5.h itself because it must write
// what our writer refuses to: files that break the schema.
//
//   fuzz_fixtures [variants] [seed] [extra seed files...]      (defaults: 600, 1)
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_mutate.h"
#include "h5/fixture.h"

using namespace conform;
using conform::test::below;
using conform::test::byte_edit;
using conform::test::ByteEditSizes;
namespace fs = std::filesystem;

namespace {

// A value in [-1, 1), uniform (the values only need to be finite and varied).
double signed_unit(Rng& r) {
    return static_cast<double>(static_cast<int64_t>(r.next() >> 11) - (int64_t(1) << 52)) / double(int64_t(1) << 52);
}

// ---- valid fixtures ------------------------------------------------------------

Tensor tensor(Rng& r, int64_t rows, int64_t cols) {
    Tensor t(rows, cols);
    for (auto& v : t.data) v = static_cast<float>(signed_unit(r));
    return t;
}
DTensor dtensor(Rng& r, int64_t rows, int64_t cols) {
    DTensor t;
    t.shape = {rows, cols};
    t.data.resize(static_cast<size_t>(rows * cols));
    for (auto& v : t.data) v = signed_unit(r);
    return t;
}
std::vector<int64_t> positions(int64_t start, int64_t n) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[i] = start + i;
    return p;
}

// One case of each op, small; the expected values only need the right shapes
// (the loader validates, it does not judge).
std::vector<h5::FixtureCase> cases_of_every_op(Rng& r) {
    std::vector<h5::FixtureCase> out;
    auto add = [&](Case c) {
        h5::FixtureCase fc;
        c.group = std::string(to_string(c.op)) + "_case";
        fc.c = std::move(c);
        fc.attrs["producer"] = std::string("fuzz_fixtures");
        out.push_back(std::move(fc));
    };
    const int64_t T = 3, D = 8, hd = 4, H = 4, KV = 2, F = 12, S = 5;
    {
        Case c;
        c.op = Op::rmsnorm;
        c.config.norm_eps = 1e-5;
        c.inputs["x"] = tensor(r, T, D);
        c.inputs["weight"] = tensor(r, 1, D);
        c.expected["out"] = dtensor(r, T, D);
        add(c);
    }
    {
        Case c;
        c.op = Op::rope;
        c.config.head_dim = hd;
        c.config.rope_layout = RopeLayout::interleaved;
        c.config.rope_theta = 5e5;
        c.inputs["x"] = tensor(r, T, 2 * hd);
        c.positions["positions"] = positions(8190, T);
        c.expected["out"] = dtensor(r, T, 2 * hd);
        add(c);
    }
    {
        Case c;
        c.op = Op::qk_norm;
        c.config.head_dim = hd;
        c.config.norm_eps = 1e-6;
        c.inputs["x"] = tensor(r, T, 3 * hd);
        c.inputs["weight"] = tensor(r, 1, hd);
        c.expected["out"] = dtensor(r, T, 3 * hd);
        add(c);
    }
    {
        Case c;
        c.op = Op::attention;
        c.config.n_heads = H;
        c.config.n_kv_heads = KV;
        c.config.head_dim = hd;
        c.inputs["q"] = tensor(r, T, H * hd);
        c.inputs["k"] = tensor(r, S, KV * hd);
        c.inputs["v"] = tensor(r, S, KV * hd);
        c.positions["q_positions"] = positions(2, T);
        c.positions["k_positions"] = positions(0, S);
        c.expected["out"] = dtensor(r, T, H * hd);
        add(c);
    }
    {
        Case c;
        c.op = Op::swiglu;
        c.inputs["x"] = tensor(r, T, D);
        c.inputs["w1"] = tensor(r, D, F);
        c.inputs["w3"] = tensor(r, D, F);
        c.inputs["w2"] = tensor(r, F, D);
        c.expected["out"] = dtensor(r, T, D);
        add(c);
    }
    for (Op op : {Op::block, Op::decode}) {
        Case c;
        c.op = op;
        BlockConfig& k = c.config;
        k.d_model = D, k.n_heads = H, k.n_kv_heads = KV, k.head_dim = hd, k.ffn_dim = F;
        k.rope_layout = RopeLayout::neox, k.rope_theta = 1e6, k.qk_norm = true, k.norm_eps = 1e-6;
        c.prefill = op == Op::decode ? 1 : 0;
        c.inputs["x"] = tensor(r, T, D);
        c.inputs["attn_norm"] = tensor(r, 1, D);
        c.inputs["wq"] = tensor(r, D, H * hd);
        c.inputs["wk"] = tensor(r, D, KV * hd);
        c.inputs["wv"] = tensor(r, D, KV * hd);
        c.inputs["wo"] = tensor(r, H * hd, D);
        c.inputs["ffn_norm"] = tensor(r, 1, D);
        c.inputs["w1"] = tensor(r, D, F);
        c.inputs["w3"] = tensor(r, D, F);
        c.inputs["w2"] = tensor(r, F, D);
        c.inputs["q_norm"] = tensor(r, 1, hd);
        c.inputs["k_norm"] = tensor(r, 1, hd);
        c.positions["positions"] = positions(40000, T);
        c.expected["out"] = dtensor(r, T, D);
        if (op == Op::block) {
            c.expected["q_rot"] = dtensor(r, T, H * hd);
            c.expected["k"] = dtensor(r, T, KV * hd);
        }
        add(c);
    }
    return out;
}

std::vector<char> slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void spit(const std::string& p, const std::vector<char>& bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// ---- foreign fixtures: what h5py writes ------------------------------------------------
// The earliest file format (no metadata checksums) and variable-length strings
// (kept in a global heap): the files a corrupt byte can make HDF5 itself misread.

[[noreturn]] void die(const std::string& msg);
hid_t ok(hid_t id, const char* what);

void vlen_attr(hid_t obj, const char* name, const std::string& v) {
    hid_t t = ok(H5Tcopy(H5T_C_S1), "H5Tcopy");
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t s = ok(H5Screate(H5S_SCALAR), "H5Screate");
    hid_t a = ok(H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
    const char* p = v.c_str();
    ok(H5Awrite(a, t, &p), "H5Awrite");
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}
void int_attr(hid_t obj, const char* name, int64_t v) {
    hid_t s = ok(H5Screate(H5S_SCALAR), "H5Screate");
    hid_t a = ok(H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
    ok(H5Awrite(a, H5T_NATIVE_INT64, &v), "H5Awrite");
    H5Aclose(a);
    H5Sclose(s);
}
void float_attr(hid_t obj, const char* name, double v) {
    hid_t s = ok(H5Screate(H5S_SCALAR), "H5Screate");
    hid_t a = ok(H5Acreate2(obj, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
    ok(H5Awrite(a, H5T_NATIVE_DOUBLE, &v), "H5Awrite");
    H5Aclose(a);
    H5Sclose(s);
}
void plain_dataset(hid_t g, const std::string& name, std::vector<hsize_t> dims, hid_t ftype, hid_t mtype, const void* data) {
    hid_t s = ok(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple");
    hid_t d = ok(H5Dcreate2(g, name.c_str(), ftype, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Dcreate2");
    ok(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite");
    H5Dclose(d);
    H5Sclose(s);
}

void write_foreign(const std::string& path, const std::vector<h5::FixtureCase>& cases) {
    hid_t f = ok(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), "H5Fcreate foreign");
    vlen_attr(f, "conform_schema", "conform-fixture/1");
    for (const auto& fc : cases) {
        const Case& c = fc.c;
        hid_t g = ok(H5Gcreate2(f, c.group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2");
        vlen_attr(g, "op", to_string(c.op));
        vlen_attr(g, "description", "written like h5py writes");
        if (c.op == Op::decode) int_attr(g, "prefill", c.prefill);
        hid_t k = ok(H5Gcreate2(g, "config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "config");
        for (const auto& field : required_config(c.op)) {
            const BlockConfig& b = c.config;
            if (field == "rope_layout") vlen_attr(k, "rope_layout", to_string(b.rope_layout));
            else if (field == "rope_theta") float_attr(k, "rope_theta", b.rope_theta);
            else if (field == "norm_eps") float_attr(k, "norm_eps", b.norm_eps);
            else if (field == "qk_norm") int_attr(k, "qk_norm", b.qk_norm);
            else if (field == "d_model") int_attr(k, "d_model", b.d_model);
            else if (field == "n_heads") int_attr(k, "n_heads", b.n_heads);
            else if (field == "n_kv_heads") int_attr(k, "n_kv_heads", b.n_kv_heads);
            else if (field == "head_dim") int_attr(k, "head_dim", b.head_dim);
            else if (field == "ffn_dim") int_attr(k, "ffn_dim", b.ffn_dim);
        }
        H5Gclose(k);
        hid_t in = ok(H5Gcreate2(g, "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "inputs");
        for (const auto& [name, t] : c.inputs) {
            std::vector<hsize_t> dims = h5::is_vector_input(name) ? std::vector<hsize_t>{hsize_t(t.numel())}
                                                                   : std::vector<hsize_t>{hsize_t(t.rows()), hsize_t(t.cols())};
            plain_dataset(in, name, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, t.data.data());
        }
        for (const auto& [name, p] : c.positions)
            plain_dataset(in, name, {hsize_t(p.size())}, H5T_STD_I64LE, H5T_NATIVE_INT64, p.data());
        H5Gclose(in);
        hid_t ex = ok(H5Gcreate2(g, "expected", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "expected");
        for (const auto& [name, t] : c.expected)
            plain_dataset(ex, name, {hsize_t(t.rows()), hsize_t(t.cols())}, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                          t.data.data());
        H5Gclose(ex);
        H5Gclose(g);
    }
    if (H5Fclose(f) < 0) die("H5Fclose foreign");
}

// ---- structural edits (HDF5 C API on a copy) ------------------------------------

[[noreturn]] void die(const std::string& msg) {
    std::cerr << "fuzz_fixtures: harness error: " << msg << "\n";
    std::exit(2);
}
hid_t ok(hid_t id, const char* what) {
    if (id < 0) die(what);
    return id;
}

// What the loader must make of an edited file.
enum class Expect { refuse, load, either };

struct Edit {
    std::string name;
    Expect expect;
    std::function<void(hid_t file, Rng&)> apply;
};

std::vector<std::string> children(hid_t loc, const std::string& path) {
    std::vector<std::string> names;
    H5Literate_by_name(
        loc, path.c_str(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
        [](hid_t, const char* n, const H5L_info_t*, void* d) -> herr_t {
            static_cast<std::vector<std::string>*>(d)->push_back(n);
            return 0;
        },
        &names, H5P_DEFAULT);
    return names;
}

std::string pick(Rng& r, const std::vector<std::string>& v) { return v.empty() ? std::string() : v[below(r, v.size())]; }

void set_attr_raw(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const void* value) {
    if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
    hid_t s = ok(H5Screate(H5S_SCALAR), "H5Screate");
    hid_t a = ok(H5Acreate2(obj, name, file_type, s, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
    ok(H5Awrite(a, mem_type, value), "H5Awrite");
    H5Aclose(a);
    H5Sclose(s);
}
void set_attr(hid_t obj, const char* name, int64_t v) { set_attr_raw(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v); }
void set_attr(hid_t obj, const char* name, double v) { set_attr_raw(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v); }
void set_attr(hid_t obj, const char* name, const std::string& v) {
    hid_t t = ok(H5Tcopy(H5T_C_S1), "H5Tcopy");
    H5Tset_size(t, v.size() + 1);
    set_attr_raw(obj, name, t, t, v.c_str());
    H5Tclose(t);
}

// Replaces dataset `path` by one of `file_type` and `dims` (values converted
// from float64 noise, NaN-free).
void replace_dataset(hid_t file, const std::string& path, hid_t file_type, std::vector<hsize_t> dims, Rng& r) {
    if (H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0) ok(H5Ldelete(file, path.c_str(), H5P_DEFAULT), "H5Ldelete");
    hid_t s = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    ok(s, "H5Screate");
    hid_t d = ok(H5Dcreate2(file, path.c_str(), file_type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Dcreate2");
    hsize_t n = 1;
    for (hsize_t x : dims) n *= x;
    if (n > 0 && H5Tget_class(file_type) != H5T_STRING) {
        std::vector<double> v(n);
        for (auto& x : v) x = signed_unit(r);
        ok(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dwrite");
    }
    H5Dclose(d);
    H5Sclose(s);
}

std::vector<hsize_t> dims_of(hid_t file, const std::string& path) {
    hid_t d = ok(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "H5Dopen2");
    hid_t s = H5Dget_space(d);
    int nd = H5Sget_simple_extent_ndims(s);
    std::vector<hsize_t> dims(static_cast<size_t>(std::max(nd, 0)));
    if (nd > 0) H5Sget_simple_extent_dims(s, dims.data(), nullptr);
    H5Sclose(s);
    H5Dclose(d);
    return dims;
}

// Writes `value` at a random element of a float dataset.
void poke(hid_t file, const std::string& path, double value, Rng& r) {
    hid_t d = ok(H5Dopen2(file, path.c_str(), H5P_DEFAULT), "H5Dopen2");
    hid_t s = H5Dget_space(d);
    const hssize_t n = H5Sget_simple_extent_npoints(s);
    std::vector<double> v(static_cast<size_t>(n));
    ok(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dread");
    v[below(r, v.size())] = value;
    ok(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dwrite");
    H5Sclose(s);
    H5Dclose(d);
}

struct Target {
    std::string c;       // case group
    std::string ds;      // a dataset path below it
};
Target any_dataset(hid_t f, Rng& r, const char* where = nullptr) {
    const std::string c = pick(r, children(f, "/"));
    const std::string sub = where ? where : (below(r, 4) == 0 ? "expected" : "inputs");
    const std::string n = pick(r, children(f, "/" + c + "/" + sub));
    return {c, "/" + c + "/" + sub + "/" + n};
}

std::vector<Edit> edits() {
    std::vector<Edit> e;
    auto open_group = [](hid_t f, const std::string& p) { return ok(H5Gopen2(f, p.c_str(), H5P_DEFAULT), p.c_str()); };

    e.push_back({"delete the schema attribute", Expect::refuse, [](hid_t f, Rng&) { H5Adelete(f, "conform_schema"); }});
    e.push_back({"schema major 2", Expect::refuse, [](hid_t f, Rng&) { set_attr(f, "conform_schema", std::string("conform-fixture/2")); }});
    e.push_back({"schema garbage", Expect::refuse, [](hid_t f, Rng&) { set_attr(f, "conform_schema", std::string("hdf5 is fun")); }});
    e.push_back({"schema as integer", Expect::refuse, [](hid_t f, Rng&) { set_attr(f, "conform_schema", int64_t(1)); }});
    e.push_back({"schema minor 1.7 (accepted)", Expect::load,
                 [](hid_t f, Rng&) { set_attr(f, "conform_schema", std::string("conform-fixture/1.7")); }});
    e.push_back({"unknown op", Expect::refuse, [=](hid_t f, Rng& r) {
                     hid_t g = open_group(f, "/" + pick(r, children(f, "/")));
                     set_attr(g, "op", std::string("flash_rope"));
                     H5Gclose(g);
                 }});
    e.push_back({"another op's name", Expect::either, [=](hid_t f, Rng& r) {
                     hid_t g = open_group(f, "/" + pick(r, children(f, "/")));
                     set_attr(g, "op", std::string(to_string(kAllOps[below(r, kAllOps.size())])));
                     H5Gclose(g);
                 }});
    e.push_back({"op deleted", Expect::refuse, [=](hid_t f, Rng& r) {
                     hid_t g = open_group(f, "/" + pick(r, children(f, "/")));
                     H5Adelete(g, "op");
                     H5Gclose(g);
                 }});
    e.push_back({"op as float", Expect::refuse, [=](hid_t f, Rng& r) {
                     hid_t g = open_group(f, "/" + pick(r, children(f, "/")));
                     set_attr(g, "op", 2.5);
                     H5Gclose(g);
                 }});
    e.push_back({"a whole case deleted (others remain)", Expect::either,
                 [](hid_t f, Rng& r) { H5Ldelete(f, pick(r, children(f, "/")).c_str(), H5P_DEFAULT); }});
    e.push_back({"inputs/expected/config group deleted", Expect::either, [](hid_t f, Rng& r) {
                     const std::string c = pick(r, children(f, "/"));
                     const char* g[] = {"inputs", "expected", "config"};
                     H5Ldelete(f, ("/" + c + "/" + g[below(r, 3)]).c_str(), H5P_DEFAULT);
                 }});
    e.push_back({"input dataset deleted", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r, "inputs");
                     H5Ldelete(f, t.ds.c_str(), H5P_DEFAULT);
                 }});
    e.push_back({"expected/out deleted", Expect::refuse, [](hid_t f, Rng& r) {
                     const std::string c = pick(r, children(f, "/"));
                     H5Ldelete(f, ("/" + c + "/expected/out").c_str(), H5P_DEFAULT);
                 }});
    e.push_back({"dataset replaced by float64 (inputs) / int32 (expected)", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     const bool input = t.ds.find("/inputs/") != std::string::npos;
                     const bool pos = t.ds.find("positions") != std::string::npos;
                     replace_dataset(f, t.ds, input ? (pos ? H5T_IEEE_F32LE : H5T_IEEE_F64LE) : H5T_STD_I32LE,
                                     dims_of(f, t.ds), r);
                 }});
    e.push_back({"dataset replaced by float16-sized float / string", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     hid_t type = H5Tcopy(below(r, 2) ? H5T_IEEE_F32LE : H5T_C_S1);
                     if (H5Tget_class(type) == H5T_FLOAT) {
                         // a 16-bit IEEE half, as numpy's float16 writes it
                         H5Tset_fields(type, 15, 10, 5, 0, 10);
                         H5Tset_size(type, 2);
                         H5Tset_ebias(type, 15);
                     } else {
                         H5Tset_size(type, 4);
                     }
                     const bool pos = t.ds.find("positions") != std::string::npos;
                     if (pos && H5Tget_class(type) == H5T_FLOAT) {  // positions of float type
                         H5Tclose(type);
                         type = H5Tcopy(H5T_IEEE_F32LE);
                     }
                     replace_dataset(f, t.ds, type, dims_of(f, t.ds), r);
                     H5Tclose(type);
                 }});
    e.push_back({"dataset with an extra dimension", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     auto d = dims_of(f, t.ds);
                     d.insert(d.begin() + static_cast<long>(below(r, d.size() + 1)), 1 + below(r, 2));
                     const bool pos = t.ds.find("positions") != std::string::npos;
                     const bool input = t.ds.find("/inputs/") != std::string::npos;
                     replace_dataset(f, t.ds, pos ? H5T_STD_I64LE : input ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, d, r);
                 }});
    e.push_back({"dataset as a scalar", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     replace_dataset(f, t.ds, H5T_IEEE_F32LE, {}, r);
                 }});
    e.push_back({"dataset with a zero dimension", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     auto d = dims_of(f, t.ds);
                     d[below(r, d.size())] = 0;
                     const bool pos = t.ds.find("positions") != std::string::npos;
                     const bool input = t.ds.find("/inputs/") != std::string::npos;
                     replace_dataset(f, t.ds, pos ? H5T_STD_I64LE : input ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, d, r);
                 }});
    e.push_back({"dataset one longer in one dimension", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     auto d = dims_of(f, t.ds);
                     d[below(r, d.size())] += 1 + below(r, 3);
                     const bool pos = t.ds.find("positions") != std::string::npos;
                     const bool input = t.ds.find("/inputs/") != std::string::npos;
                     // Positions must stay increasing and non-negative to isolate the shape error.
                     if (pos) {
                         hsize_t n = d[0];
                         if (H5Lexists(f, t.ds.c_str(), H5P_DEFAULT) > 0) H5Ldelete(f, t.ds.c_str(), H5P_DEFAULT);
                         hid_t s = H5Screate_simple(1, &n, nullptr);
                         hid_t ds = H5Dcreate2(f, t.ds.c_str(), H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
                         std::vector<int64_t> p(n);
                         for (hsize_t i = 0; i < n; ++i) p[i] = 100 + static_cast<int64_t>(i);
                         H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data());
                         H5Dclose(ds);
                         H5Sclose(s);
                         return;
                     }
                     replace_dataset(f, t.ds, input ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, d, r);
                 }});
    e.push_back({"NaN or Inf injected", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     if (t.ds.find("positions") != std::string::npos) t = any_dataset(f, r, "expected");
                     const double bad[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                           -std::numeric_limits<double>::infinity()};
                     poke(f, t.ds, bad[below(r, 3)], r);
                 }});
    e.push_back({"huge finite value in expected (loads)", Expect::load,
                 [](hid_t f, Rng& r) { poke(f, any_dataset(f, r, "expected").ds, 1e300, r); }});
    e.push_back({"negative position", Expect::refuse, [](hid_t f, Rng& r) {
                     // Only cases with positions: rope, attention, block, decode.
                     for (int tries = 0; tries < 20; ++tries) {
                         const std::string c = pick(r, children(f, "/"));
                         for (const auto& n : children(f, "/" + c + "/inputs"))
                             if (n.find("positions") != std::string::npos) {
                                 const std::string p = "/" + c + "/inputs/" + n;
                                 hid_t d = H5Dopen2(f, p.c_str(), H5P_DEFAULT);
                                 hid_t s = H5Dget_space(d);
                                 std::vector<int64_t> v(static_cast<size_t>(H5Sget_simple_extent_npoints(s)));
                                 H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
                                 for (auto& x : v) x -= 1000000;
                                 H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
                                 H5Sclose(s);
                                 H5Dclose(d);
                                 return;
                             }
                     }
                     H5Adelete(f, "conform_schema");  // no case with positions drawn: still an error
                 }});
    e.push_back({"config attribute set to a bad value", Expect::refuse, [=](hid_t f, Rng& r) {
                     for (int tries = 0; tries < 20; ++tries) {
                         const std::string c = pick(r, children(f, "/"));
                         if (H5Lexists(f, ("/" + c + "/config").c_str(), H5P_DEFAULT) <= 0) continue;
                         hid_t g = open_group(f, "/" + c + "/config");
                         std::vector<std::string> names;
                         H5Aiterate2(
                             g, H5_INDEX_NAME, H5_ITER_INC, nullptr,
                             [](hid_t, const char* n, const H5A_info_t*, void* d) -> herr_t {
                                 static_cast<std::vector<std::string>*>(d)->push_back(n);
                                 return 0;
                             },
                             &names);
                         const std::string a = pick(r, names);
                         if (a == "rope_layout") set_attr(g, a.c_str(), std::string(below(r, 2) ? "gptj" : ""));
                         else if (a == "rope_theta") set_attr(g, a.c_str(), below(r, 2) ? std::nan("") : -1.0);
                         else if (a == "norm_eps") set_attr(g, a.c_str(), below(r, 2) ? std::nan("") : -1e-5);
                         else if (a == "qk_norm") set_attr(g, a.c_str(), int64_t(2 + below(r, 5)));
                         else if (a == "n_kv_heads") set_attr(g, a.c_str(), int64_t(3));  // 4 heads: not divisible
                         else if (a == "head_dim") set_attr(g, a.c_str(), int64_t(below(r, 2) ? 3 : 0));
                         else if (!a.empty()) {
                             const int64_t bad[] = {0, -4, int64_t(1) << 40, std::numeric_limits<int64_t>::min()};
                             set_attr(g, a.c_str(), bad[below(r, 4)]);
                         }
                         H5Gclose(g);
                         if (!a.empty()) return;
                     }
                     H5Adelete(f, "conform_schema");
                 }});
    e.push_back({"config attribute of the wrong type", Expect::refuse, [=](hid_t f, Rng& r) {
                     for (int tries = 0; tries < 20; ++tries) {
                         const std::string c = pick(r, children(f, "/"));
                         if (H5Lexists(f, ("/" + c + "/config").c_str(), H5P_DEFAULT) <= 0) continue;
                         hid_t g = open_group(f, "/" + c + "/config");
                         if (H5Aexists(g, "head_dim") > 0) set_attr(g, "head_dim", 4.0);
                         else if (H5Aexists(g, "norm_eps") > 0) set_attr(g, "norm_eps", std::string("1e-5"));
                         else if (H5Aexists(g, "n_heads") > 0) set_attr(g, "n_heads", std::string("four"));
                         else {
                             H5Gclose(g);
                             continue;
                         }
                         H5Gclose(g);
                         return;
                     }
                     H5Adelete(f, "conform_schema");
                 }});
    e.push_back({"unknown attributes and datasets (ignored)", Expect::load, [=](hid_t f, Rng& r) {
                     const std::string c = pick(r, children(f, "/"));
                     hid_t g = open_group(f, "/" + c);
                     set_attr(g, "from_the_future", std::string("v1.9"));
                     set_attr(g, "rope_scaling_factor", 8.0);
                     H5Gclose(g);
                     replace_dataset(f, "/" + c + "/inputs/mystery", H5T_STD_I8LE, {3, 3, 3}, r);
                     replace_dataset(f, "/" + c + "/expected/logits", H5T_IEEE_F32LE, {2}, r);
                     replace_dataset(f, "/notes", H5T_IEEE_F64LE, {4}, r);  // top level, not a group: not a case
                 }});
    e.push_back({"a dataset where a group belongs", Expect::refuse, [](hid_t f, Rng& r) {
                     const std::string c = pick(r, children(f, "/"));
                     const char* g[] = {"inputs", "expected"};
                     const std::string p = "/" + c + "/" + g[below(r, 2)];
                     H5Ldelete(f, p.c_str(), H5P_DEFAULT);
                     replace_dataset(f, p, H5T_IEEE_F32LE, {2, 2}, r);
                 }});
    e.push_back({"a group where a dataset belongs", Expect::refuse, [](hid_t f, Rng& r) {
                     Target t = any_dataset(f, r);
                     H5Ldelete(f, t.ds.c_str(), H5P_DEFAULT);
                     H5Gclose(ok(H5Gcreate2(f, t.ds.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "g"));
                 }});
    e.push_back({"decode prefill out of range or missing", Expect::refuse, [](hid_t f, Rng& r) {
                     hid_t g = H5Gopen2(f, "/decode_case", H5P_DEFAULT);
                     if (g < 0) {  // decode not in this file
                         H5Adelete(f, "conform_schema");
                         return;
                     }
                     const int k = static_cast<int>(below(r, 3));
                     if (k == 0) H5Adelete(g, "prefill");
                     else set_attr(g, "prefill", int64_t(k == 1 ? -1 : 99));
                     H5Gclose(g);
                 }});
    e.push_back({"a case's group is a link into another file", Expect::refuse, [](hid_t f, Rng& r) {
                     const std::string c = pick(r, children(f, "/"));
                     const char* g[] = {"inputs", "expected", "config"};
                     const std::string p = "/" + c + "/" + g[below(r, 3)];
                     if (H5Lexists(f, p.c_str(), H5P_DEFAULT) > 0) H5Ldelete(f, p.c_str(), H5P_DEFAULT);
                     ok(H5Lcreate_external("/etc/hostname", "/", f, p.c_str(), H5P_DEFAULT, H5P_DEFAULT), "elink");
                 }});
    e.push_back({"every case deleted", Expect::refuse, [](hid_t f, Rng&) {
                     for (const auto& c : children(f, "/")) H5Ldelete(f, c.c_str(), H5P_DEFAULT);
                 }});
    e.push_back({"soft link to a case (ignored)", Expect::load, [](hid_t f, Rng& r) {
                     const std::string c = pick(r, children(f, "/"));
                     H5Lcreate_soft(("/" + c).c_str(), f, "alias", H5P_DEFAULT, H5P_DEFAULT);
                     H5Lcreate_external("/nonexistent.h5", "/x", f, "elsewhere", H5P_DEFAULT, H5P_DEFAULT);
                 }});
    return e;
}

// ---- byte edits (tests/fuzz_mutate.h) --------------------------------------------------

// Most of a small fixture's metadata sits in its first few KiB.
constexpr ByteEditSizes byte_sizes{/*head*/ 4096, /*random_run*/ 64, /*fill_run*/ 256, /*copy_run*/ 128, /*append*/ 512};

}  // namespace

int main(int argc, char** argv) {
    const int variants = argc > 1 ? std::atoi(argv[1]) : 600;
    Rng rng{argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1};
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const auto t0 = std::chrono::steady_clock::now();

    const fs::path dir = fs::temp_directory_path() / ("conform-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(dir);

    // The seeds: every op in one file, and each op alone in its own, as our
    // writer writes them (checksummed metadata: read in this process, so the
    // sanitizers see every read); and every op in one file as h5py writes it
    // (no checksums: read through read_fixture's crash-containing child).
    std::vector<std::string> seeds;
    std::vector<bool> ours;
    {
        Rng vr{7};
        auto all = cases_of_every_op(vr);
        seeds.push_back((dir / "all.h5").string());
        h5::write_fixture(seeds.back(), all, false);
        for (const auto& fc : all) {
            seeds.push_back((dir / (fc.c.group + ".h5")).string());
            h5::write_fixture(seeds.back(), {fc}, false);
        }
        ours.assign(seeds.size(), true);
        for (int k = 0; k < 3; ++k) {  // a third of the variants
            seeds.push_back((dir / ("foreign" + std::to_string(k) + ".h5")).string());
            write_foreign(seeds.back(), all);
        }
        // More seeds from the command line (e.g. a file h5py wrote: no
        // metadata checksums, variable-length strings in the global heap).
        for (int a = 3; a < argc; ++a) {
            seeds.push_back((dir / ("extra" + std::to_string(a) + ".h5")).string());
            fs::copy_file(argv[a], seeds.back());
        }
        ours.resize(seeds.size(), false);
        for (const auto& s : seeds) {
            auto cases = h5::read_fixture(s);  // the seeds themselves must load
            if (cases.empty()) die("seed " + s + " has no cases");
        }
    }
    const std::vector<Edit> structural = edits();

    int loaded = 0, refused = 0, contained = 0, failures = 0, structural_n = 0, bytes_n = 0;
    std::vector<int> per_edit(structural.size(), 0);
    const std::string victim = (dir / "victim.h5").string();
    for (int i = 0; i < variants; ++i) {
        const size_t seed_index = below(rng, seeds.size());
        const std::string& seed = seeds[seed_index];
        const bool in_process = ours[seed_index];
        std::string what;
        Expect expect = Expect::either;
        if (i % 2 == 0) {
            // Structural: an HDF5-valid file that breaks (or stretches) the schema.
            const size_t k = (i / 2) % structural.size();  // every edit, round-robin
            const Edit& e = structural[k];
            fs::copy_file(seed, victim, fs::copy_options::overwrite_existing);
            hid_t f = ok(H5Fopen(victim.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen victim");
            e.apply(f, rng);
            if (H5Fclose(f) < 0) die("H5Fclose victim");
            what = "structural: " + e.name;
            expect = e.expect;
            ++per_edit[k];
            ++structural_n;
        } else {
            std::vector<char> bytes = slurp(seed);
            what = "bytes: " + byte_edit(bytes, rng, byte_sizes);
            spit(victim, bytes);
            ++bytes_n;
        }
        what += " (of " + fs::path(seed).filename().string() + ", variant " + std::to_string(i) + ")";
        // FUZZ_KEEP=i keeps variant i as ./fuzz_variant_i.h5, to reproduce a finding outside the run.
        if (const char* keep = std::getenv("FUZZ_KEEP"); keep && std::atoi(keep) == i)
            fs::copy_file(victim, "fuzz_variant_" + std::to_string(i) + ".h5", fs::copy_options::overwrite_existing);
        const auto tv = std::chrono::steady_clock::now();
        try {
            // A few KiB read in milliseconds: two seconds means HDF5 is looping.
            const auto cases = in_process ? h5::read_fixture_in_process(victim) : h5::read_fixture(victim, 2.0);
            for (const auto& c : cases) validate_case(c);  // loaded means valid
            ++loaded;
            if (expect == Expect::refuse) {
                ++failures;
                std::cerr << "FAIL: loaded, but must be refused: " << what << "\n";
            }
        } catch (const InputError& e) {
            ++refused;
            const std::string msg = e.what();
            if (expect == Expect::load) {
                ++failures;
                std::cerr << "FAIL: refused, but must load: " << what << "\n  " << msg << "\n";
            }
            if (msg.rfind(victim, 0) != 0) {
                ++failures;
                std::cerr << "FAIL: message does not start with the file name: " << what << "\n  " << msg << "\n";
            }
            if (msg.find("HDF5 library crashed") != std::string::npos || msg.find("took more than") != std::string::npos)
                ++contained;
            if (std::getenv("FUZZ_VERBOSE"))
                std::cerr << what << " [" << std::chrono::duration<double>(std::chrono::steady_clock::now() - tv).count()
                          << " s]\n  -> " << msg << "\n";
        } catch (const std::exception& e) {
            ++failures;
            std::cerr << "FAIL: " << what << ": not an InputError: " << e.what() << "\n";
        } catch (...) {
            ++failures;
            std::cerr << "FAIL: " << what << ": unknown exception\n";
        }
        // Every identifier the loader opened is closed again, on every path.
        if (const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); open != 0) {
            ++failures;
            std::cerr << "FAIL: " << what << ": " << open << " HDF5 identifiers left open\n";
            H5close();
            H5open();
            H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        }
    }
    fs::remove_all(dir);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "fuzz_fixtures: " << variants << " variants (" << structural_n << " structural over "
              << structural.size() << " kinds, " << bytes_n << " byte-level) of " << seeds.size() << " seed files: "
              << loaded << " loaded cleanly, " << refused << " refused with InputError (" << contained
              << " of them HDF5 crashes contained in the reading child), " << failures
              << " failures, " << secs << " s\n";
    for (size_t k = 0; k < structural.size(); ++k)
        if (per_edit[k] == 0) {
            std::cerr << "FAIL: structural edit never exercised: " << structural[k].name << "\n";
            ++failures;
        }
    return failures == 0 ? 0 : 1;
}
