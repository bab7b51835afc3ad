#include "weights/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_input.h"
#include "weights/error.h"

namespace conform::weights {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The safetensors library's own bound on the header (MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeader = 100'000'000;

// A JSON value for a message, cut short: a damaged header can be megabytes.
std::string show(const json& v) { return printable(shown(v, 77)); }

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw WeightsError(file + ": " + what); }

// Parses JSON text, refusing a key that appears twice in one object (the
// library behind json keeps the last one silently; a reader that took the
// first would see another tensor than we do).
json parse_strict(const char* begin, const char* end, const std::string& file, const char* field) {
    // A header nests three deep (tensor, field, shape); ten million values is
    // ten times the tensors of any checkpoint. Bounded before parsing, so a
    // value printed in a message cannot recurse without end.
    if (const std::string why = json_shape_problem(std::string_view(begin, static_cast<size_t>(end - begin)),
                                                   kMaxJsonDepth, 10'000'000);
        !why.empty())
        fail(file, std::string(field) + ": " + why + ", far past any checkpoint's");
    std::vector<std::set<std::string>> open;
    std::string duplicate;
    auto cb = [&](int, json::parse_event_t ev, json& parsed) {
        if (ev == json::parse_event_t::object_start) open.emplace_back();
        else if (ev == json::parse_event_t::object_end && !open.empty()) open.pop_back();
        else if (ev == json::parse_event_t::key && !open.empty() && duplicate.empty() &&
                 !open.back().insert(parsed.get<std::string>()).second)
            duplicate = parsed.get<std::string>();
        return true;
    };
    json j;
    try {
        j = json::parse(begin, end, cb);
    } catch (const json::exception& e) {
        std::string what = e.what();
        const auto at = what.find("] ");
        fail(file, std::string(field) + ": not valid JSON: " + printable(at == std::string::npos ? what : what.substr(at + 2)));
    }
    if (!duplicate.empty()) fail(file, std::string(field) + ": key '" + printable(duplicate) + "' appears twice in one object");
    return j;
}

bool non_negative_integer(const json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

}  // namespace

int64_t safetensors_dtype_size(const std::string& d) {
    if (d == "F64" || d == "I64" || d == "U64") return 8;
    if (d == "F32" || d == "I32" || d == "U32") return 4;
    if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
    if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3" || d == "F8_E8M0") return 1;
    return 0;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
    SafetensorsFile f;
    f.file_ = MappedFile::open(path);
    const uint64_t size = f.file_.size();
    if (size < 8)
        fail(path, "header length: the file has " + std::to_string(size) +
                       " bytes, expected at least 8 (a little-endian u64 header length, then the JSON header)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | f.file_.data()[i];
    if (n > size - 8)
        fail(path, "header length: " + std::to_string(n) + " bytes, beyond the end of the file (" +
                       std::to_string(size - 8) + " bytes follow the length)");
    if (n > kMaxHeader)
        fail(path, "header length: " + std::to_string(n) + " bytes, more than safetensors' limit of " +
                       std::to_string(kMaxHeader));
    if (n == 0 || f.file_.data()[8] != '{')
        fail(path, "header: expected a JSON object starting at byte 8, found " +
                       (n == 0 ? std::string("an empty header") : "byte " + std::to_string(f.file_.data()[8])));
    const char* text = reinterpret_cast<const char*>(f.file_.data() + 8);
    const json h = parse_strict(text, text + n, path, "header");
    if (!h.is_object()) fail(path, "header: expected a JSON object, found " + std::string(h.type_name()));
    f.data_start_ = 8 + n;
    const uint64_t data_size = size - f.data_start_;

    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        const json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) fail(path, "__metadata__: expected an object of strings, found " + show(v));
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    fail(path, "__metadata__." + printable(m.key()) + ": expected a string, found " + show(m.value()));
                f.metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string where = path + ": " + printable(name) + ": ";
        if (!v.is_object()) throw WeightsError(where + "expected an object {dtype, shape, data_offsets}, found " + show(v));
        SafetensorsEntry e;
        e.name = name;
        if (!v.contains("dtype") || !v.at("dtype").is_string())
            throw WeightsError(where + "dtype: expected a string, found " + (v.contains("dtype") ? show(v.at("dtype")) : "nothing"));
        e.dtype = v.at("dtype").get<std::string>();
        const int64_t esize = safetensors_dtype_size(e.dtype);
        if (esize == 0)
            throw WeightsError(where + "dtype: unknown dtype '" + printable(e.dtype) +
                               "' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E5M2 F8_E4M3 F8_E8M0)");
        if (!v.contains("shape") || !v.at("shape").is_array())
            throw WeightsError(where + "shape: expected a list of non-negative integers, found " +
                               (v.contains("shape") ? show(v.at("shape")) : "nothing"));
        uint64_t elements = 1;
        bool overflow = false;
        for (const json& d : v.at("shape")) {
            if (!non_negative_integer(d) || d.get<uint64_t>() > uint64_t(INT64_MAX))
                throw WeightsError(where + "shape: expected a list of non-negative integers, found " + show(v.at("shape")));
            e.shape.push_back(d.get<int64_t>());
            overflow |= __builtin_mul_overflow(elements, d.get<uint64_t>(), &elements);
        }
        if (!v.contains("data_offsets") || !v.at("data_offsets").is_array() || v.at("data_offsets").size() != 2 ||
            !non_negative_integer(v.at("data_offsets")[0]) || !non_negative_integer(v.at("data_offsets")[1]))
            throw WeightsError(where + "data_offsets: expected [begin, end], two non-negative integers, found " +
                               (v.contains("data_offsets") ? show(v.at("data_offsets")) : "nothing"));
        e.begin = v.at("data_offsets")[0].get<uint64_t>();
        e.end = v.at("data_offsets")[1].get<uint64_t>();
        if (e.end < e.begin)
            throw WeightsError(where + "data_offsets: [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                               "] ends before it begins");
        if (e.end > data_size)
            throw WeightsError(where + "data_offsets: [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                               "] out of range: the data section has " + std::to_string(data_size) + " bytes");
        uint64_t bytes = 0;
        overflow |= __builtin_mul_overflow(elements, static_cast<uint64_t>(esize), &bytes);
        if (overflow || bytes != e.end - e.begin)
            throw WeightsError(where + "data_offsets: [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] is " +
                               std::to_string(e.end - e.begin) + " bytes, expected shape " + shape_string(e.shape) +
                               " x " + std::to_string(esize) + " bytes (" + e.dtype + ") = " +
                               (overflow ? std::string("more than 2^64") : std::to_string(bytes)));
        f.entries_.push_back(std::move(e));
    }

    // The spans must tile the data section: sorted by begin, each starting
    // where the one before ends, the last ending at the end of the file.
    std::stable_sort(f.entries_.begin(), f.entries_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t at = 0;
    std::string previous;
    for (const auto& e : f.entries_) {
        if (e.begin != at)
            throw WeightsError(path + ": " + printable(e.name) + ": data_offsets: begins at " + std::to_string(e.begin) +
                               ", expected " + std::to_string(at) +
                               (previous.empty() ? std::string(" (the start of the data section)")
                                                 : " (where " + printable(previous) + " ends)") +
                               (e.begin < at ? ": the tensors overlap" : ": the tensors leave a gap"));
        at = e.end;
        previous = e.name;
    }
    if (at != data_size)
        fail(path, "data_offsets: the tensors end at byte " + std::to_string(at) + " of the data section, expected " +
                       std::to_string(data_size) + " (its size): " + std::to_string(data_size - at) +
                       " bytes belong to no tensor");
    for (size_t i = 0; i < f.entries_.size(); ++i) f.by_name_[f.entries_[i].name] = i;
    return f;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

StoredTensor SafetensorsFile::stored(const SafetensorsEntry& e) const {
    StoredTensor t;
    t.file = path();
    t.name = e.name;
    t.shape = e.shape;
    if (e.dtype == "F32") t.encoding = Encoding::f32;
    else if (e.dtype == "F16") t.encoding = Encoding::f16;
    else if (e.dtype == "BF16") t.encoding = Encoding::bf16;
    else
        throw WeightsError(path() + ": " + printable(e.name) + ": dtype: " + printable(e.dtype) +
                           " is not a float type the block reads (F32, F16, BF16)");
    t.data = file_.data() + data_start_ + e.begin;
    t.nbytes = e.end - e.begin;
    return t;
}

Safetensors Safetensors::open(const std::string& path) {
    Safetensors s;
    std::error_code ec;
    fs::path p(path);
    fs::path single;
    if (fs::is_directory(p, ec)) {
        if (fs::exists(p / "model.safetensors.index.json", ec)) s.index_ = (p / "model.safetensors.index.json").string();
        else if (fs::exists(p / "model.safetensors", ec)) single = p / "model.safetensors";
        else
            throw WeightsError(path + ": a directory with neither model.safetensors.index.json nor model.safetensors");
        s.dir_ = p.string();
    } else {
        if (p.extension() == ".json") s.index_ = p.string();
        else single = p;
        s.dir_ = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    }

    if (!single.empty()) {
        s.files_.push_back(SafetensorsFile::open(single.string()));
        for (const auto& e : s.files_[0].entries()) s.where_[e.name] = 0;
        return s;
    }

    // Sharded: the index's weight_map, every shard it names opened once.
    const MappedFile index = MappedFile::open(s.index_);
    // An index lists a few thousand tensors; the headers' own bound is far past any.
    if (index.size() > kMaxHeader)
        fail(s.index_, std::to_string(index.size()) + " bytes, more than the " + std::to_string(kMaxHeader) +
                           " an index may have");
    const char* text = reinterpret_cast<const char*>(index.data());
    const json j = parse_strict(text, text + index.size(), s.index_, "index");
    if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
        fail(s.index_, "weight_map: expected an object mapping tensor names to shard files");
    std::map<std::string, size_t> shard_of_file;
    const fs::path dir = fs::path(s.index_).has_parent_path() ? fs::path(s.index_).parent_path() : fs::path(".");
    for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it) {
        const std::string field = "weight_map." + printable(it.key());
        if (!it.value().is_string()) fail(s.index_, field + ": expected a shard file name, found " + show(it.value()));
        const std::string shard = it.value().get<std::string>();
        if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
            fail(s.index_, field + ": '" + printable(shard) + "' is not the name of a file beside the index");
        auto [pos, fresh] = shard_of_file.emplace(shard, s.files_.size());
        if (fresh) s.files_.push_back(SafetensorsFile::open((dir / shard).string()));
        if (!s.files_[pos->second].find(it.key()))
            fail(s.index_, field + ": the shard " + printable(shard) + " holds no tensor named " + printable(it.key()));
        s.where_[it.key()] = pos->second;
    }
    if (s.files_.empty()) fail(s.index_, "weight_map: empty, expected at least one tensor");
    return s;
}

std::vector<std::string> Safetensors::names() const {
    std::vector<std::string> n;
    for (const auto& [name, _] : where_) n.push_back(name);
    return n;
}

std::optional<Safetensors::Found> Safetensors::find(const std::string& name) const {
    auto it = where_.find(name);
    if (it == where_.end()) return std::nullopt;
    const SafetensorsFile& f = files_[it->second];
    return Found{&f, f.find(name)};
}

}  // namespace conform::weights
