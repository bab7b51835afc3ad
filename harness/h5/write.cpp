// Writing fixture files (fixtures/SCHEMA.md) atomically: a hidden temporary
// file, then link(2) or rename(2) into place.
#include "h5/fixture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <filesystem>
#include <stdexcept>

#include "h5/handle.h"
#include "h5/schema.h"

namespace conform::h5 {

namespace fs = std::filesystem;

// ============================================================================
// Writing
// ============================================================================

namespace {

struct Writer {
    std::string path;  // the temporary file, for messages
    // No modification times in object headers: the same cases make the same
    // bytes, so a regenerated fixture shows no spurious diff.
    PropList gcpl, dcpl;

    hid_t check(hid_t id, const std::string& what) const {
        if (id < 0) throw std::runtime_error(path + ": " + what + because());
        return id;
    }
    void check_status(herr_t s, const std::string& what) const {
        if (s < 0) throw std::runtime_error(path + ": " + what + because());
    }

    void attr(hid_t obj, const std::string& name, const std::string& v) const {
        // Fixed-length, NUL-terminated UTF-8: no global heap to go stale, and
        // h5py reads it back as bytes.
        Datatype t(check(H5Tcopy(H5T_C_S1), "H5Tcopy"));
        check_status(H5Tset_size(t.get(), v.size() + 1), "H5Tset_size");
        check_status(H5Tset_strpad(t.get(), H5T_STR_NULLTERM), "H5Tset_strpad");
        check_status(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
        Dataspace s(check(H5Screate(H5S_SCALAR), "H5Screate"));
        Attribute a(check(H5Acreate2(obj, name.c_str(), t.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT),
                          "cannot create attribute " + name));
        check_status(H5Awrite(a.get(), t.get(), v.c_str()), "cannot write attribute " + name);
    }
    void attr(hid_t obj, const std::string& name, int64_t v) const {
        Dataspace s(check(H5Screate(H5S_SCALAR), "H5Screate"));
        Attribute a(check(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT),
                          "cannot create attribute " + name));
        check_status(H5Awrite(a.get(), H5T_NATIVE_INT64, &v), "cannot write attribute " + name);
    }
    void attr(hid_t obj, const std::string& name, double v) const {
        Dataspace s(check(H5Screate(H5S_SCALAR), "H5Screate"));
        Attribute a(check(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT),
                          "cannot create attribute " + name));
        check_status(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &v), "cannot write attribute " + name);
    }

    void dataset(hid_t g, const std::string& name, const std::vector<hsize_t>& dims, hid_t file_type, hid_t mem_type,
                 const void* data) const {
        Dataspace s(check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple"));
        Dataset d(check(H5Dcreate2(g, name.c_str(), file_type, s.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                        "cannot create dataset " + name));
        check_status(H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "cannot write dataset " + name);
    }

    Group group(hid_t loc, const std::string& name) const {
        return Group(check(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), "cannot create group " + name));
    }

    void config(hid_t case_group, Op op, const BlockConfig& cfg) const {
        const std::vector<std::string> fields = required_config(op);
        bool optional_on = false;  // swiglu has no required field, but GeGLU's hidden_act is one to write
        for (const auto& f : optional_config(op)) optional_on = optional_on || twist_on(*find_twist(f), cfg);
        if (fields.empty() && !optional_on) return;
        Group g = group(case_group, "config");
        // One attribute per field, as conform/config.h's table names it.
        auto write = [&](const char* name, const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, bool>) attr(g.get(), name, int64_t(v ? 1 : 0));
            else if constexpr (is_named_enum<V>)
                attr(g.get(), name, std::string(to_string(v)));
            else attr(g.get(), name, v);
        };
        for (const auto& f : fields) {
            bool written = false;
            for_each_field(cfg, [&](const ConfigField& cf, const auto& v) {
                if (f == cf.h5 && !cf.is_scaling_param()) write(cf.h5, v), written = true;
            });
            if (!written) throw std::logic_error("write_fixture: config field " + f + " has no writer");
        }
        // A twist's field only when it is on: files without it stay what they were.
        for (const auto& f : optional_config(op))
            for_each_field(cfg, [&](const ConfigField& cf, const auto& v) {
                if (f == cf.name && twist_on(*find_twist(f), cfg)) write(cf.h5, v);
            });
        // RoPE scaling and partial rotary only when a case has them: files
        // without them stay what they were.
        if (std::find(fields.begin(), fields.end(), "rope_theta") == fields.end()) return;
        const RopeScalingType type = cfg.rope_scaling.type;
        if (type != RopeScalingType::none)
            for_each_field(cfg, [&](const ConfigField& cf, const auto& v) {
                if (cf.applies(type) || std::string_view(cf.h5) == "rope_scaling") write(cf.h5, v);
            });
        if (cfg.rotary_dim != 0) attr(g.get(), "rotary_dim", cfg.rotary_dim);
    }

    void write_case(hid_t root, const std::string& name, const FixtureCase& fc) const {
        const Case& c = fc.c;
        Group g = group(root, name);
        attr(g.get(), "op", std::string(to_string(c.op)));
        if (!c.description.empty()) attr(g.get(), "description", c.description);
        if (c.op == Op::decode) attr(g.get(), "prefill", c.prefill);
        for (const auto& [k, v] : fc.attrs) {
            if (k == "op" || k == "description" || k == "prefill")
                throw InputError("write_fixture: attribute '" + k + "' is written from the case itself");
            std::visit([&](const auto& x) { attr(g.get(), k, x); }, v);
        }
        config(g.get(), c.op, c.config);

        Group in = group(g.get(), "inputs");
        for (const auto& n : float_inputs(c.op, c.config)) {
            const Tensor& t = c.in(n);
            const std::vector<hsize_t> dims = is_vector_input(n)
                                                  ? std::vector<hsize_t>{hsize_t(t.numel())}
                                                  : std::vector<hsize_t>{hsize_t(t.rows()), hsize_t(t.cols())};
            dataset(in.get(), n, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, t.data.data());
        }
        for (const auto& n : position_inputs(c.op)) {
            const auto& p = c.pos(n);
            dataset(in.get(), n, {hsize_t(p.size())}, H5T_STD_I64LE, H5T_NATIVE_INT64, p.data());
        }

        Group ex = group(g.get(), "expected");
        for (const auto& n : output_names(c.op)) {
            auto it = c.expected.find(n);
            if (it == c.expected.end()) continue;
            const DTensor& t = it->second;
            dataset(ex.get(), n, {hsize_t(t.rows()), hsize_t(t.cols())}, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                    t.data.data());
        }
    }
};

void fsync_path(const std::string& p, bool directory) {
    const int fd = ::open(p.c_str(), O_RDONLY | (directory ? O_DIRECTORY : 0));
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace

namespace {

// Writes a file atomically: `body` fills the root group of a hidden temporary
// file beside `path`, which is then linked (or, with force, renamed) into place.
template <class Body>
void publish(const std::string& path, bool force, Body body) {
    std::error_code ec;
    if (!force && fs::exists(path, ec)) throw InputError(path + ": exists (use --force to overwrite)");

    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    fs::create_directories(dir, ec);
    if (ec) throw std::runtime_error(dir.string() + ": cannot create directory: " + ec.message());
    static std::atomic<unsigned> counter{0};
    // Hidden, so a directory walk never picks up a half-written file.
    const std::string tmp = (dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                                    std::to_string(counter++)))
                                .string();
    Silence quiet;
    try {
        Writer w{tmp, PropList(H5Pcreate(H5P_GROUP_CREATE)), PropList(H5Pcreate(H5P_DATASET_CREATE))};
        w.check(w.gcpl.get(), "H5Pcreate");
        w.check(w.dcpl.get(), "H5Pcreate");
        w.check_status(H5Pset_obj_track_times(w.gcpl.get(), false), "H5Pset_obj_track_times");
        w.check_status(H5Pset_obj_track_times(w.dcpl.get(), false), "H5Pset_obj_track_times");
        PropList fapl(w.check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"));
        // The 1.8 object formats checksum every metadata block, so a damaged
        // file fails cleanly on read instead of being misparsed.
        w.check_status(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "H5Pset_libver_bounds");
        PropList fcpl(w.check(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate"));
        w.check_status(H5Pset_obj_track_times(fcpl.get(), false), "H5Pset_obj_track_times");  // the root group
        File f(w.check(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get()), "cannot create"));
        {
            Group root(w.check(H5Gopen2(f.get(), "/", H5P_DEFAULT), "cannot open the root group"));
            body(w, root.get());
        }
        if (!f.close()) throw std::runtime_error(tmp + ": cannot close (disk full?)" + because());
        fsync_path(tmp, false);
    } catch (...) {
        fs::remove(tmp, ec);
        throw;
    }
    if (force) {
        if (std::rename(tmp.c_str(), path.c_str()) != 0) {
            const int e = errno;
            fs::remove(tmp, ec);
            throw std::runtime_error(path + ": cannot rename into place: " + std::strerror(e));
        }
    } else {
        // link(2) fails with EEXIST if the name appeared meanwhile: never a
        // silent overwrite, even racing another writer.
        if (::link(tmp.c_str(), path.c_str()) != 0) {
            const int e = errno;
            if (e == EEXIST) {
                fs::remove(tmp, ec);
                throw InputError(path + ": exists (use --force to overwrite)");
            }
            if (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP) {
                // A file system without hard links: check, then rename (a
                // narrow race instead of none).
                if (fs::exists(path, ec)) {
                    fs::remove(tmp, ec);
                    throw InputError(path + ": exists (use --force to overwrite)");
                }
                if (std::rename(tmp.c_str(), path.c_str()) == 0) {
                    fsync_path(dir.string(), true);
                    return;
                }
            }
            fs::remove(tmp, ec);
            throw std::runtime_error(path + ": cannot link into place: " + std::strerror(e));
        }
        fs::remove(tmp, ec);
    }
    fsync_path(dir.string(), true);
}

}  // namespace

void write_fixture(const std::string& path, const std::vector<FixtureCase>& cases, bool force) {
    if (cases.empty()) throw InputError(path + ": no cases to write");
    std::vector<std::string> names;
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i].c;
        const std::string name = c.group.empty() ? "case_" + std::to_string(i) : c.group;
        if (name.find('/') != std::string::npos || name == "." || name == "..")
            throw InputError(path + ": case name '" + name + "' is not a valid group name");
        if (std::find(names.begin(), names.end(), name) != names.end())
            throw InputError(path + ": two cases named '" + name + "'");
        if (c.expected.empty()) throw InputError(path + ":/" + name + ": expected: no golden outputs to write");
        validate_case(c);
        names.push_back(name);
    }
    publish(path, force, [&](const Writer& w, hid_t root) {
        w.attr(root, "conform_schema", std::string(kSchema));
        for (size_t i = 0; i < cases.size(); ++i) w.write_case(root, names[i], cases[i]);
    });
}

void write_logits(const std::string& path, const LogitsFile& l, bool force) {
    const auto T = static_cast<hsize_t>(l.token_ids.size());
    if (l.positions.size() != T) throw InputError(path + ": positions: expected " + std::to_string(T) + ", found " +
                                                  std::to_string(l.positions.size()));
    auto check_shape = [&](const std::string& name, const DTensor& t) {
        if (t.rows() != static_cast<int64_t>(T) || t.numel() != t.rows() * t.cols())
            throw InputError(path + ": " + name + ": expected [" + std::to_string(T) + ", vocab] logits");
    };
    check_shape("reference", l.reference);
    for (const auto& [name, t] : l.impls) check_shape("impls/" + name, t);
    publish(path, force, [&](const Writer& w, hid_t root) {
        w.attr(root, "conform_schema", std::string("conform-logits/1"));
        for (const auto& [k, v] : l.attrs) std::visit([&](const auto& x) { w.attr(root, k, x); }, v);
        w.dataset(root, "token_ids", {T}, H5T_STD_I64LE, H5T_NATIVE_INT64, l.token_ids.data());
        w.dataset(root, "positions", {T}, H5T_STD_I64LE, H5T_NATIVE_INT64, l.positions.data());
        const std::vector<hsize_t> dims = {T, static_cast<hsize_t>(l.reference.cols())};
        w.dataset(root, "reference", dims, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, l.reference.data.data());
        Group g = w.group(root, "impls");
        for (const auto& [name, t] : l.impls) {
            if (name.find('/') != std::string::npos) throw InputError(path + ": impls/" + name + ": not a valid name");
            w.dataset(g.get(), name, dims, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, t.data.data());
        }
    });
}

}  // namespace conform::h5
