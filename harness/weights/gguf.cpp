#include "weights/gguf.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "weights/error.h"

namespace conform::weights {

namespace {

// ggml's tensor types: name, elements per block, bytes per block
// (ggml.c type_traits; docs/gguf.md for the numbering), and the encoding
// stored.h decodes it as, for the types conform reads.
struct GgmlTraits {
    uint32_t id;
    const char* name;
    uint64_t block, bytes;
    std::optional<Encoding> read;
};
constexpr auto kNo = std::nullopt;
constexpr GgmlTraits kGgml[] = {
    {0, "F32", 1, 4, Encoding::f32},          {1, "F16", 1, 2, Encoding::f16},
    {2, "Q4_0", 32, 18, Encoding::q4_0},      {3, "Q4_1", 32, 20, Encoding::q4_1},
    {6, "Q5_0", 32, 22, Encoding::q5_0},      {7, "Q5_1", 32, 24, Encoding::q5_1},
    {8, "Q8_0", 32, 34, Encoding::q8_0},      {9, "Q8_1", 32, 36, kNo},
    {10, "Q2_K", 256, 84, kNo},               {11, "Q3_K", 256, 110, kNo},
    {12, "Q4_K", 256, 144, Encoding::q4_k},   {13, "Q5_K", 256, 176, Encoding::q5_k},
    {14, "Q6_K", 256, 210, Encoding::q6_k},   {15, "Q8_K", 256, 292, Encoding::q8_k},
    {16, "IQ2_XXS", 256, 66, kNo},            {17, "IQ2_XS", 256, 74, kNo},
    {18, "IQ3_XXS", 256, 98, kNo},            {19, "IQ1_S", 256, 50, kNo},
    {20, "IQ4_NL", 32, 18, Encoding::iq4_nl}, {21, "IQ3_S", 256, 110, kNo},
    {22, "IQ2_S", 256, 82, kNo},              {23, "IQ4_XS", 256, 136, kNo},
    {24, "I8", 1, 1, kNo},                    {25, "I16", 1, 2, kNo},
    {26, "I32", 1, 4, kNo},                   {27, "I64", 1, 8, kNo},
    {28, "F64", 1, 8, kNo},                   {29, "IQ1_M", 256, 56, kNo},
    {30, "BF16", 1, 2, Encoding::bf16},       {34, "TQ1_0", 256, 54, kNo},
    {35, "TQ2_0", 256, 66, kNo},              {39, "MXFP4", 32, 17, Encoding::mxfp4},
};

const GgmlTraits* traits(uint32_t id) {
    for (const auto& t : kGgml)
        if (t.id == id) return &t;
    return nullptr;
}

// A string from the file, for a message: printable, and cut short.
std::string shown(const std::string& s) { return s.size() > 96 ? printable(s.substr(0, 96)) + "..." : printable(s); }

// Reads the header in order; every read is checked against the bytes left.
class Cursor {
   public:
    Cursor(const uint8_t* data, uint64_t size, std::string file) : p_(data), size_(size), file_(std::move(file)) {}

    uint64_t pos() const { return pos_; }
    uint64_t left() const { return size_ - pos_; }

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw WeightsError(file_ + ": " + field + ": " + what);
    }
    void need(uint64_t n, const std::string& field) const {
        if (n > left())
            fail(field, "needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                            ", past the end of the file (" + std::to_string(size_) + " bytes)");
    }
    template <class T>
    T read(const std::string& field) {
        need(sizeof(T), field);
        T v;
        std::memcpy(&v, p_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string string(const std::string& field, uint64_t max_len) {
        const uint64_t n = read<uint64_t>(field + " (string length)");
        if (n > left())
            fail(field, "string length " + std::to_string(n) + " runs past the end of the file (" +
                            std::to_string(left()) + " bytes left at offset " + std::to_string(pos_) + ")");
        if (n > max_len) fail(field, "string length " + std::to_string(n) + ", more than " + std::to_string(max_len));
        std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
        pos_ += n;
        return s;
    }
    void skip(uint64_t n, const std::string& field) {
        need(n, field);
        pos_ += n;
    }

   private:
    const uint8_t* p_;
    uint64_t size_;
    uint64_t pos_ = 0;
    std::string file_;
};

uint64_t scalar_size(GgufType t) {
    switch (t) {
        case GgufType::u8:
        case GgufType::i8:
        case GgufType::boolean: return 1;
        case GgufType::u16:
        case GgufType::i16: return 2;
        case GgufType::u32:
        case GgufType::i32:
        case GgufType::f32: return 4;
        case GgufType::u64:
        case GgufType::i64:
        case GgufType::f64: return 8;
        case GgufType::string:
        case GgufType::array: return 0;
    }
    return 0;
}

GgufType value_type(Cursor& c, const std::string& field) {
    const uint32_t t = c.read<uint32_t>(field);
    if (t > 12) c.fail(field, std::to_string(t) + " is not a GGUF value type (0..12)");
    return static_cast<GgufType>(t);
}

// Arrays nest; real files use one level (four is generous).
constexpr int kMaxNesting = 4;

GgufValue read_value(Cursor& c, GgufType t, const std::string& key, int depth, bool keep) {
    GgufValue v;
    v.type = t;
    const std::string field = key + " (" + to_string(t) + ")";
    switch (t) {
        case GgufType::u8: v.u = c.read<uint8_t>(field); break;
        case GgufType::i8: v.i = c.read<int8_t>(field); break;
        case GgufType::u16: v.u = c.read<uint16_t>(field); break;
        case GgufType::i16: v.i = c.read<int16_t>(field); break;
        case GgufType::u32: v.u = c.read<uint32_t>(field); break;
        case GgufType::i32: v.i = c.read<int32_t>(field); break;
        case GgufType::u64: v.u = c.read<uint64_t>(field); break;
        case GgufType::i64: v.i = c.read<int64_t>(field); break;
        case GgufType::f32: v.f = c.read<float>(field); break;
        case GgufType::f64: v.f = c.read<double>(field); break;
        case GgufType::boolean: {
            v.u = c.read<uint8_t>(field);
            if (v.u > 1) c.fail(key, "a bool must be 0 or 1, found " + std::to_string(v.u));
            break;
        }
        case GgufType::string: v.s = c.string(key, UINT64_MAX); break;
        case GgufType::array: {
            if (depth >= kMaxNesting) c.fail(key, "arrays nested deeper than " + std::to_string(kMaxNesting));
            v.elem = value_type(c, key + " (array element type)");
            v.length = c.read<uint64_t>(key + " (array length)");
            // The least each element takes, so a huge count fails before any loop.
            const uint64_t least = v.elem == GgufType::string ? 8 : v.elem == GgufType::array ? 12 : scalar_size(v.elem);
            if (v.length > c.left() / least)
                c.fail(key, "array of " + std::to_string(v.length) + " " + to_string(v.elem) +
                                " runs past the end of the file (" + std::to_string(c.left()) + " bytes left)");
            const bool keep_items = keep && v.length <= GgufValue::kKeptItems;
            if (!keep_items && least > 0 && v.elem != GgufType::string && v.elem != GgufType::array) {
                c.skip(v.length * least, key);
                break;
            }
            for (uint64_t k = 0; k < v.length; ++k) {
                GgufValue item = read_value(c, v.elem, key + "[" + std::to_string(k) + "]", depth + 1, keep_items);
                if (keep_items) v.items.push_back(std::move(item));
            }
            break;
        }
    }
    return v;
}

}  // namespace

const char* to_string(GgufType t) {
    switch (t) {
        case GgufType::u8: return "u8";
        case GgufType::i8: return "i8";
        case GgufType::u16: return "u16";
        case GgufType::i16: return "i16";
        case GgufType::u32: return "u32";
        case GgufType::i32: return "i32";
        case GgufType::f32: return "f32";
        case GgufType::boolean: return "bool";
        case GgufType::string: return "string";
        case GgufType::array: return "array";
        case GgufType::u64: return "u64";
        case GgufType::i64: return "i64";
        case GgufType::f64: return "f64";
    }
    return "?";
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufType::u8:
        case GgufType::i8:
        case GgufType::u16:
        case GgufType::i16:
        case GgufType::u32:
        case GgufType::i32:
        case GgufType::u64:
        case GgufType::i64: return true;
        default: return false;
    }
}

std::optional<int64_t> GgufValue::integer() const {
    switch (type) {
        case GgufType::u8:
        case GgufType::u16:
        case GgufType::u32:
        case GgufType::u64:
            if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
            return static_cast<int64_t>(u);
        case GgufType::i8:
        case GgufType::i16:
        case GgufType::i32:
        case GgufType::i64: return i;
        default: return std::nullopt;
    }
}

std::optional<double> GgufValue::number() const {
    if (type == GgufType::f32 || type == GgufType::f64) return f;
    if (auto n = integer()) return static_cast<double>(*n);
    return std::nullopt;
}

std::string GgufValue::describe() const {
    std::ostringstream o;
    o << to_string(type) << " ";
    switch (type) {
        case GgufType::string: o << "'" << shown(s) << "'"; break;
        case GgufType::array: o.str(""); o << "array of " << length << " " << to_string(elem); break;
        case GgufType::boolean: o << (u ? "true" : "false"); break;
        case GgufType::f32:
        case GgufType::f64: o << f; break;
        default:
            if (type == GgufType::i8 || type == GgufType::i16 || type == GgufType::i32 || type == GgufType::i64) o << i;
            else o << u;
    }
    return o.str();
}

const char* ggml_type_name(uint32_t type) {
    const GgmlTraits* t = traits(type);
    return t ? t->name : nullptr;
}

std::optional<Encoding> ggml_encoding(uint32_t type) {
    const GgmlTraits* t = traits(type);
    return t ? t->read : std::nullopt;
}

GgufFile GgufFile::open(const std::string& path) {
    GgufFile g;
    g.file_ = MappedFile::open(path);
    Cursor c(g.file_.data(), g.file_.size(), path);

    // ---- header ---------------------------------------------------------------
    if (g.file_.size() < 4 || std::memcmp(g.file_.data(), "GGUF", 4) != 0) {
        std::ostringstream o;
        o << "expected 'GGUF' (47 47 55 46), found";
        for (size_t k = 0; k < std::min<size_t>(4, g.file_.size()); ++k)
            o << " " << std::hex << static_cast<int>(g.file_.data()[k]);
        if (g.file_.size() < 4) o << (g.file_.size() ? "" : " nothing") << " (the file has " << std::dec << g.file_.size() << " bytes)";
        c.fail("magic", o.str());
    }
    c.skip(4, "magic");
    g.version_ = c.read<uint32_t>("version");
    if (g.version_ == 1) c.fail("version", "1 is not supported (its counts and lengths are 32-bit; convert again)");
    if (g.version_ == 0x02000000u || g.version_ == 0x03000000u)
        c.fail("version", "the file is big-endian (version reads " + std::to_string(g.version_) +
                              "); only little-endian GGUF is read");
    if (g.version_ != 2 && g.version_ != 3)
        c.fail("version", "expected 2 or 3, found " + std::to_string(g.version_));
    const uint64_t n_tensors = c.read<uint64_t>("tensor_count");
    const uint64_t n_kv = c.read<uint64_t>("metadata_kv_count");
    // The least one entry takes: a kv 8 + 1 + 4 + 1 bytes, a tensor info 8 + 1 + 4 + 8 + 4 + 8.
    if (n_kv > c.left() / 14)
        c.fail("metadata_kv_count", std::to_string(n_kv) + " entries cannot fit in the " + std::to_string(c.left()) +
                                        " bytes that follow");
    if (n_tensors > c.left() / 33)
        c.fail("tensor_count", std::to_string(n_tensors) + " tensor infos cannot fit in the " +
                                   std::to_string(c.left()) + " bytes that follow");

    // ---- metadata ---------------------------------------------------------------
    for (uint64_t k = 0; k < n_kv; ++k) {
        const std::string at = "metadata entry " + std::to_string(k);
        const std::string key = c.string(at + " key", 65535);
        if (key.empty()) c.fail(at, "empty key");
        const GgufType t = value_type(c, shown(key) + " (value type)");
        GgufValue v = read_value(c, t, shown(key), 0, true);
        if (!g.kv_.emplace(key, std::move(v)).second) c.fail(shown(key), "key appears twice in the metadata");
    }
    if (const GgufValue* a = g.find("general.alignment")) {
        const auto n = a->integer();
        if (!n || *n <= 0 || (*n & (*n - 1)) != 0 || *n > (1 << 30))
            c.fail("general.alignment", "expected a power of two, found " + a->describe());
        g.alignment_ = static_cast<uint64_t>(*n);
    }

    // ---- tensor infos -------------------------------------------------------------
    for (uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensorInfo t;
        t.name = c.string("tensor info " + std::to_string(k) + " name", 64);  // the spec: at most 64 bytes
        const std::string name = shown(t.name);
        const uint32_t n_dims = c.read<uint32_t>(name + ": n_dims");
        if (n_dims < 1 || n_dims > 4) c.fail(name + ": n_dims", "expected 1 to 4, found " + std::to_string(n_dims));
        uint64_t elements = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const uint64_t ne = c.read<uint64_t>(name + ": ne[" + std::to_string(d) + "]");
            if (ne > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, ne, &elements) ||
                elements > static_cast<uint64_t>(INT64_MAX))
                c.fail(name + ": ne", "the element count overflows int64 at ne[" + std::to_string(d) + "] = " + std::to_string(ne));
            t.ne.push_back(ne);
        }
        t.type = c.read<uint32_t>(name + ": type");
        const GgmlTraits* tr = traits(t.type);
        if (!tr) c.fail(name + ": type", std::to_string(t.type) + " is not a ggml tensor type");
        if (t.ne[0] % tr->block != 0)
            c.fail(name + ": ne[0]", std::to_string(t.ne[0]) + " is not a multiple of " + tr->name + "'s block of " +
                                         std::to_string(tr->block) + " elements");
        if (__builtin_mul_overflow(elements / tr->block, tr->bytes, &t.nbytes))
            c.fail(name + ": ne", "the byte size overflows");
        t.offset = c.read<uint64_t>(name + ": offset");
        if (t.offset % g.alignment_ != 0)
            c.fail(name + ": offset", std::to_string(t.offset) + " is not a multiple of the alignment " +
                                          std::to_string(g.alignment_));
        if (!g.by_name_.emplace(t.name, g.tensors_.size()).second) c.fail(name, "tensor name appears twice");
        g.tensors_.push_back(std::move(t));
    }

    // ---- tensor data --------------------------------------------------------------
    const uint64_t pad = (g.alignment_ - c.pos() % g.alignment_) % g.alignment_;
    g.data_start_ = c.pos() + pad;
    const uint64_t size = g.file_.size();
    if (!g.tensors_.empty() && g.data_start_ > size)
        c.fail("tensor data", "starts at byte " + std::to_string(g.data_start_) + " (aligned to " +
                                  std::to_string(g.alignment_) + "), past the end of the file (" + std::to_string(size) + " bytes)");
    const uint64_t data_size = g.data_start_ <= size ? size - g.data_start_ : 0;
    for (const auto& t : g.tensors_)
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            c.fail(shown(t.name) + ": offset",
                   "[" + std::to_string(t.offset) + ", " + std::to_string(t.offset) + " + " + std::to_string(t.nbytes) +
                       ") out of range: the tensor data has " + std::to_string(data_size) + " bytes");
    std::vector<const GgufTensorInfo*> order;
    for (const auto& t : g.tensors_)
        if (t.nbytes > 0) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t k = 1; k < order.size(); ++k)
        if (order[k]->offset < order[k - 1]->offset + order[k - 1]->nbytes)
            c.fail(shown(order[k]->name) + ": offset",
                   std::to_string(order[k]->offset) + " overlaps " + shown(order[k - 1]->name) + " ([" +
                       std::to_string(order[k - 1]->offset) + ", " +
                       std::to_string(order[k - 1]->offset + order[k - 1]->nbytes) + "))");
    return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

StoredTensor GgufFile::stored(const GgufTensorInfo& t) const {
    const auto enc = ggml_encoding(t.type);
    if (!enc)
        throw WeightsError(path() + ": " + shown(t.name) + ": type: " + ggml_type_name(t.type) +
                           " is not read (" + encodings_read() + " are; requantise to one of them)");
    StoredTensor s;
    s.file = path();
    s.name = t.name;
    for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) s.shape.push_back(static_cast<int64_t>(*it));
    s.encoding = *enc;
    s.data = file_.data() + data_start_ + t.offset;
    s.nbytes = t.nbytes;
    return s;
}

}  // namespace conform::weights
