// harness/h5/fixture.h — fixture files: HDF5, schema conform-fixture/1
// (fixtures/SCHEMA.md). Golden cases written by us or by any other tool
// (h5py, a framework's test suite), read back as ordinary cases.
//
// Torch-free and hdf5.h-free on purpose: the fuzz test links this with the
// core alone, under AddressSanitizer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/case.h"

namespace conform::h5 {

// The schema this build writes, and the major version it reads (any minor).
inline constexpr const char* kSchema = "conform-fixture/1";
inline constexpr int kSchemaMajor = 1;

// A dataset larger than this many elements is refused before anything is
// allocated (a corrupt or hostile shape must not exhaust memory). A full
// llama3-8b block's w1 is 59M elements.
inline constexpr int64_t kMaxElements = int64_t(1) << 28;

// Every case of a fixture file, validated: inputs against the config and each
// other, expected values against the op's output shapes, everything finite.
// Case::file is `path` as given, Case::group the case's group name, Case::id
// "<file name>:/<group>". Throws InputError naming file, case and field for
// anything that is not a well-formed conform fixture — never crashes: the
// file is read first in a forked child (HDF5 itself is not memory-safe on
// damaged files without metadata checksums), and a crash there is reported as
// a corrupt file, as is a read that outlasts `timeout_s` (HDF5 can also loop
// forever on such files; 0: 10 s plus 1 s per 20 MB of file).
std::vector<Case> read_fixture(const std::string& path, double timeout_s = 0);

// The same, without the child: for files known to be sound (ones we just
// wrote) and for tests that want a sanitizer to see every read.
std::vector<Case> read_fixture_in_process(const std::string& path);

// The fixture files at a path: the path itself when it is a file, else every
// *.h5 / *.hdf5 below the directory (recursively, sorted, hidden and temporary
// files skipped). Throws InputError when the path does not exist.
std::vector<std::string> fixture_files(const std::string& path);

// An attribute written on a case group beside op / description / prefill.
using AttrValue = std::variant<std::string, int64_t, double>;

struct FixtureCase {
    // op, config, inputs, positions, expected; c.group names the group
    // ("case_<i>" when empty), c.description becomes `description`.
    Case c;
    std::map<std::string, AttrValue> attrs;  // producer, seed, impl, ...
};

// Writes the cases as one fixture file, atomically: a temporary file beside
// `path`, then a rename — readers never see half a file. Without `force` an
// existing file is never replaced (even one created meanwhile: the final step
// is a link(2), which fails on an existing name). Every case is validated
// first; throws InputError for an invalid case or an existing file, and
// std::runtime_error for I/O failures.
void write_fixture(const std::string& path, const std::vector<FixtureCase>& cases, bool force);

// `conform forward --save-logits FILE.h5` (fixtures/SCHEMA.md, "Logits
// files"): the token ids, their positions, the reference's logits in float64
// and each implementation's, [T, vocab]. Written as write_fixture writes.
struct LogitsFile {
    std::vector<int64_t> token_ids, positions;
    DTensor reference;
    std::map<std::string, DTensor> impls;
    std::map<std::string, AttrValue> attrs;  // weights, dtype, ...
};
void write_logits(const std::string& path, const LogitsFile& l, bool force);
// Reads token_ids [T], positions [T] (optional) and the logits [T, vocab] —
// `logits` (an engine's file) or else `reference` — into l.reference.
// InputError naming the file and dataset, NaN/Inf included. Read first in a
// forked child, as a fixture is (a damaged file crashes libhdf5, not conform).
LogitsFile read_logits(const std::string& path);

// An engine's residual stream, layer by layer (fixtures/SCHEMA.md, "Hidden
// files"; `conform forward --expect-hidden`): token_ids [T], positions [T]
// (optional), and for each layer l = 0, 1, ... while present
// layers/l/attn_residual [T, D] (the stream after the attention sub-layer)
// and layers/l/out [T, D] (the layer's output, the next layer's input).
// InputError naming the file and dataset, NaN/Inf and shapes included. Read
// first in a forked child, as a fixture is.
struct HiddenFile {
    std::vector<int64_t> token_ids, positions;
    std::vector<DTensor> attn_residual, out;  // by layer
    std::string producer;                     // the root's `producer` attribute, "" if none
};
HiddenFile read_hidden(const std::string& path);

// Input names stored as 1-D datasets ([n] in the file, [1, n] in memory).
bool is_vector_input(const std::string& name);

}  // namespace conform::h5
