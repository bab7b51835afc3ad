// harness/report/anatomy_html.h — `conform anatomy --html FILE`: the block's
// cost as a page to play with (controls for the configuration, the sequence
// length, the cached context and the dtype; per-op bars, the intensity curve
// against a ridge point, the KV cache beside full multi-head attention,
// parameters, decode against prefill). One self-contained file: inline CSS,
// SVG and script, nothing fetched. The script evaluates the formula table of
// config/anatomy.h, embedded as JSON, the way anatomy() does, so the page
// shows the numbers `conform anatomy --json` prints for the same settings.
#pragma once

#include <cstdint>
#include <string>

#include "config/presets.h"

namespace conform::report {

// The ridge point the page marks: FLOP per byte where an op turns from
// memory- to compute-bound.
struct Ridge {
    double flops_per_byte = 0;
    std::string label;  // where the number comes from, as the page states it
    bool measured = false;
    double copy_bytes_per_s = 0, matmul_flops_per_s = 0;  // measured only
};

// Not measured: an H100 SXM-like GPU, said so on the page.
Ridge assumed_ridge();
// From this machine's ceilings (reference/ceilings.h: what bench measures).
Ridge measured_ridge(double copy_bytes_per_s, double matmul_flops_per_s, int threads, int64_t matmul_n);

struct AnatomyPage {
    config::ModelConfig model;  // the configuration the page opens with
    int64_t tokens = 512;       // prefill length
    int64_t context = 0;        // decode: tokens already cached
    std::string dtype = "f16";  // f32 | bf16 | f16
    Ridge ridge;
};

std::string render_anatomy_html(const AnatomyPage& page);

// Why the page cannot be written to `path` ("" when it can): the directory
// it names does not exist, or the path is something other than a regular
// file (a directory, a device, a link: never replaced), or a regular file
// and not `force` (docs/inputs.md: a file conform writes replaces an existing
// one only with --force). A file it may replace is replaced atomically.
std::string html_target_problem(const std::string& path, bool force);

}  // namespace conform::report
