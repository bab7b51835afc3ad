// harness/report/formats.h — the report formats, each rendered from the
// conform-report/1 JSON document (reports/README.md), never from the run's
// CaseResults: `conform merge-reports` joins sharded JSON reports and renders
// every format from the merged document.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace conform {

// JUnit XML: one <testsuite> per (impl, op), one <testcase> per case; a
// failing case carries its metrics, bounds, diagnosis and replay command.
std::string render_junit(const nlohmann::json& report);
// Markdown: the op × impl table and the first diagnosis per failure, short
// enough for a pull-request comment.
std::string render_markdown(const nlohmann::json& report);
// HTML: one self-contained page (inline CSS and SVG, nothing fetched): the
// summary, then each failing case with its error map and error profiles.
std::string render_html(const nlohmann::json& report);

// The JSON report as written to conform.json: indented like dump(2), except
// that arrays of numbers (an error map's rows and profiles) stay on one line,
// which keeps a report with error maps a fraction of the size. Strings that
// are not valid UTF-8 (an implementation's exception text) are repaired, not fatal.
std::string render_json(const nlohmann::json& report);

// The formats --report accepts, in the order they are written.
const std::vector<std::string>& report_formats();  // json, junit, md, html
// Parses "json,junit,md,html" (or "all"); nullopt with *error set on an
// unknown or empty name.
std::optional<std::vector<std::string>> parse_report_formats(const std::string& list, std::string* error);
// The file a format is written to, in out_dir: <base>.json / .xml / .md / .html.
std::string report_path(const std::string& out_dir, const std::string& format, const std::string& base = "conform");

// Why reports cannot be written into out_dir ("" when they can): it is a
// file, or it (or the nearest existing directory above it) is not writable.
// Checked before a run, so a bad --out costs nothing.
std::string out_dir_problem(const std::string& out_dir);

// Renders every format first, then writes each file atomically (temporary
// file, then rename): an existing report file is replaced only by a
// complete new one, and nothing else in out_dir is touched. Returns the paths
// written, in format order; throws std::runtime_error naming the path.
std::vector<std::string> write_reports(const nlohmann::json& report, const std::vector<std::string>& formats,
                                       const std::string& out_dir, const std::string& base = "conform");

// Every format rendered: (file name in the directory, contents), in format order.
std::vector<std::pair<std::string, std::string>> render_reports(const nlohmann::json& report,
                                                                const std::vector<std::string>& formats,
                                                                const std::string& base = "conform");

}  // namespace conform
