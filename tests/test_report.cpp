// The report formats (harness/report/): error maps, escaping, JUnit,
// Markdown, HTML, and writing them. Each renderer reads the JSON document only.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "diagnose/diagnose.h"
#include "gen/gen.h"
#include "helpers.h"
#include "report/formats.h"
#include "report/svg.h"
#include "report/view.h"
#include "report/xml.h"
#include "judge/error_map.h"

using namespace conform;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

struct TempDir {
    fs::path path;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "conform-report-XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

DTensor zeros(int64_t rows, int64_t cols) {
    DTensor t;
    t.shape = {rows, cols};
    t.data.assign(static_cast<size_t>(rows * cols), 0.0);
    return t;
}

// A case run on an implementation, judged and diagnosed as the gate does
// (without shrinking), as its JSON report.
json run_report(const std::string& impl, const std::string& case_id) {
    std::string err;
    const auto spec = gen::parse_case_id(case_id, &err);
    INFO(err);
    REQUIRE(spec);
    auto im = test::make(impl);
    const Case c = gen::materialize(*spec);
    const ImplOutputs out = run_impl(*im, c);
    REQUIRE(out.error.empty());
    const Truth truth = reference_truth(c, DType::f32);
    CaseResult res = judge_case(c, DType::f32, out.outputs, truth);
    res.impl = impl;
    if (!res.pass) {
        diagnose::explain(res, {&c, &out.outputs, &truth}, im.get());
        res.replay = "build/conform --impl " + impl + " --case '" + c.id + "'";
    }
    RunReport r;
    r.impls = {impl};
    r.ops = {to_string(spec->op)};
    r.results.push_back(std::move(res));
    return to_json(r);
}

const json& only_map(const json& report) {
    REQUIRE(report["cases"].size() == 1);
    REQUIRE_FALSE(report["cases"][0]["pass"].get<bool>());
    REQUIRE(report["cases"][0].contains("error_map"));
    return report["cases"][0]["error_map"];
}

double num(const json& v) {
    return v.is_null() ? NAN : v.get<double>();
}

// A report no writer would produce but a merge or a plugin might: every
// string field hostile to XML, Markdown and HTML; non-finite numbers.
json hostile_report() {
    json c;
    c["impl"] = "evil<impl>&\"'";
    c["op"] = "rope";
    c["dtype"] = "f32";
    c["case_id"] = "rope(T=1]]>,x=<b>|pipe|`tick`\x01\x1f\xff\xfe end)";
    c["origin"] = "property";
    c["pass"] = false;
    c["seconds"] = "nan";
    c["inputs"] = "x[1,4] <script>alert(1)</script>";
    c["error"] = "threw: \"bad\" & <worse>\r\n]]> \x07";
    c["first_failing"] = "out";
    c["replay"] = "build/conform --impl 'evil<impl>' --case '<x>'";
    c["diagnosis"] = {
        {"lines", {"a <diagnosis> & ]]> line"}}, {"tried", 3}, {"explained", false}, {"matches", json::array()}};
    c["tensors"] = json::array({json{{"name", "out"},
                                     {"pass", false},
                                     {"max_abs", "nan"},
                                     {"margin", "nan"},
                                     {"nmse", "inf"},
                                     {"cosine", "nan"},
                                     {"why", "non-finite <NaN> at ]]>"},
                                     {"bound", {{"allowed", 1e-6}, {"k", 2}}},
                                     {"worst", {{"token", 0}, {"head", -1}, {"col", 1}}}}});
    json failed = c;  // judged, and missed: NaN
    failed["case_id"] = "rope(nan)";
    failed.erase("error");
    json pass = c;
    pass["case_id"] = "rope(ok)";
    pass["pass"] = true;
    pass.erase("error");
    pass["tensors"][0]["pass"] = true;
    pass["tensors"][0]["max_abs"] = 0.0;
    pass["tensors"][0]["margin"] = "inf";
    json r;
    r["schema"] = "conform-report/1";
    r["seed"] = 1;
    r["ops"] = {"rope"};
    r["impls"] = {"evil<impl>&\"'"};
    r["dtype"] = "f32";
    r["reference"] = "LibTorch <test>";
    r["seconds"] = "inf";
    c["tensors"] = json::array();  // threw: nothing to judge
    r["cases"] = {c, failed, pass};
    return r;
}

// Parses XML with Python's xml.etree (what many CI uploaders use); "" when it
// parsed, else the parser's message. Python 3 is a dependency (scripts/setup.sh).
std::string python_parse(const std::string& xml, const std::string& check) {
    TempDir d;
    std::ofstream(d.path / "r.xml", std::ios::binary) << xml;
    std::ofstream(d.path / "t.py") << "import sys, xml.etree.ElementTree as ET\n"
                                      "root = ET.parse(sys.argv[1]).getroot()\n"
                                   << check << "\n";
    const std::string cmd = "python3 " + (d.path / "t.py").string() + " " + (d.path / "r.xml").string() + " > " +
                            (d.path / "out").string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    return rc == 0 ? "" : "python3 failed: " + slurp(d.path / "out");
}

}  // namespace

TEST_CASE("an error map pools by max, keeps head boundaries and NaN", "[report]") {
    // 3 tokens × (2 heads × 4 dims); errors planted at known places.
    DTensor ref = zeros(3, 8);
    std::vector<double> obs(24, 0.0);
    obs[1 * 8 + 4 + 2] = 0.5;  // token 1, head 1, dim 2
    obs[2 * 8 + 0] = NAN;      // token 2, head 0, dim 0
    const ErrorMap m = error_map("q", obs.data(), ref, 4, {10, 11, 12}, 0.1);
    REQUIRE(m.has_heads);
    REQUIRE(m.heads == 2);
    REQUIRE(m.grid_rows == 3);
    REQUIRE(m.grid_cols == 8);
    REQUIRE(m.grid[1 * 8 + 6] == 0.5);
    REQUIRE(std::isnan(m.grid[2 * 8 + 0]));
    REQUIRE(m.row_positions == std::vector<int64_t>{10, 11, 12});
    REQUIRE(m.by_position[0] == 0.0);
    REQUIRE(m.by_position[1] == 0.5);
    REQUIRE(std::isnan(m.by_position[2]));
    REQUIRE(m.by_dim[2] == 0.5);
    REQUIRE(std::isnan(m.by_dim[0]));
    REQUIRE(std::isnan(m.by_head[0]));
    REQUIRE(m.by_head[1] == 0.5);
    REQUIRE(m.max_err == 0.5);

    // Large: 300 tokens × 32 heads × 128 dims; capped, max preserved, heads whole.
    const int64_t T = 300, H = 32, D = 128;
    DTensor big = zeros(T, H * D);
    std::vector<double> o(static_cast<size_t>(T * H * D), 0.0);
    o[static_cast<size_t>(217 * H * D + 5 * D + 77)] = 3.0;  // token 217, head 5, dim 77
    const ErrorMap b = error_map("attn", o.data(), big, D, {}, 1.0);
    REQUIRE(b.grid_rows <= ErrorMap::kMaxRows);
    REQUIRE(b.grid_cols <= ErrorMap::kMaxCols);
    REQUIRE(b.grid_cols % b.dim_cells == 0);
    REQUIRE(b.grid_cols / b.dim_cells == H);  // every head keeps its own cells
    REQUIRE(b.by_position.size() <= static_cast<size_t>(ErrorMap::kMaxProfile));
    REQUIRE(b.by_dim.size() == static_cast<size_t>(D));
    const int64_t gr = 217 / b.row_pool, gc = 5 * b.dim_cells + 77 / b.dim_pool;
    REQUIRE(b.grid[static_cast<size_t>(gr * b.grid_cols + gc)] == 3.0);
    double total = 0;
    for (double v : b.grid) total += v;
    REQUIRE(total == 3.0);                      // nowhere else
    REQUIRE(b.row_positions[1] == b.row_pool);  // no positions given: the row index
    REQUIRE(b.by_head[5] == 3.0);
    REQUIRE(b.by_dim[77] == 3.0);

    // No heads (an rmsnorm output): plain columns.
    const ErrorMap p = error_map("out", obs.data(), ref, 0, {}, 0.1);
    REQUIRE_FALSE(p.has_heads);
    REQUIRE(p.heads == 1);
    REQUIRE(p.head_dim == 8);
    REQUIRE(p.by_head.empty());
}

TEST_CASE("a mutant's error map has its bug's pattern", "[report]") {
    SECTION("rope_layout_swapped: every pair, every position but 0") {
        const json r = run_report("rope_layout_swapped",
                                  "rope(T=16,n=2,hd=16,layout=neox,theta=10000,pos=0,mag=1,outliers=0,seed=3)");
        const json& m = only_map(r);
        const double allowed = m["allowed"];
        const auto& pos = m["by_position"]["max"];
        REQUIRE(num(pos[0]) <= allowed);  // position 0: RoPE is the identity
        for (size_t i = 1; i < pos.size(); ++i) REQUIRE(num(pos[i]) > 1e3 * allowed);
        for (const auto& v : m["by_dim"]["max"]) REQUIRE(num(v) > 1e3 * allowed);
        for (const auto& v : m["by_head"]) REQUIRE(num(v) > 1e3 * allowed);
    }
    SECTION("rope_theta_default: not pair 0, growing with position") {
        const json r = run_report("rope_theta_default",
                                  "rope(T=32,n=2,hd=16,layout=neox,theta=500000,pos=0,mag=1,outliers=0,seed=3)");
        const json& m = only_map(r);
        const double allowed = m["allowed"];
        const auto& dims = m["by_dim"]["max"];
        REQUIRE(num(dims[0]) <= allowed);  // inv_freq 1 whatever theta
        REQUIRE(num(dims[8]) <= allowed);  // its NeoX partner
        REQUIRE(num(dims[3]) > 1e3 * allowed);
        const auto& pos = m["by_position"]["max"];
        REQUIRE(num(pos[0]) <= allowed);
        REQUIRE(num(pos[1]) < num(pos[8]));  // the angle error is position × Δfrequency
    }
    SECTION("gqa_head_mapping_tiled: whole heads") {
        const json r = run_report("gqa_head_mapping_tiled",
                                  "attention(T=8,S=8,H=4,KV=2,hd=8,qpos=0,kpos=0,mag=1,outliers=0,seed=3)");
        const json& m = only_map(r);
        // The map's bound is its decisive element's (bounds are per row and
        // element): the heads that conform stay within a few of it.
        const double allowed = m["allowed"];
        // h / 2 vs h % 2: heads 0 and 3 read the right kv head, 1 and 2 the wrong one.
        const auto& heads = m["by_head"];
        REQUIRE(num(heads[0]) <= 3 * allowed);
        REQUIRE(num(heads[3]) <= 3 * allowed);
        REQUIRE(num(heads[1]) > 1e3 * allowed);
        REQUIRE(num(heads[2]) > 1e3 * allowed);
        for (const auto& row : m["grid"]["values"]) {  // at every position
            REQUIRE(num(row[0]) <= 3 * allowed);
            REQUIRE(num(row[static_cast<size_t>(m["grid"]["dim_cells"].get<int>())]) > allowed);
        }
    }
    SECTION("a passing case carries no map") {
        const json r = run_report("scalar", "rope(T=4,n=2,hd=8,layout=neox,theta=10000,pos=3,mag=1,outliers=0,seed=3)");
        REQUIRE(r["cases"][0]["pass"].get<bool>());
        REQUIRE_FALSE(r["cases"][0].contains("error_map"));
    }
}

TEST_CASE("a run's report keeps a bounded number of error maps", "[report]") {
    std::string err;
    const auto spec =
        gen::parse_case_id("rope(T=4,n=1,hd=8,layout=neox,theta=10000,pos=1,mag=1,outliers=0,seed=1)", &err);
    REQUIRE(spec);
    auto im = test::make("rope_layout_swapped");
    RunReport r;
    r.impls = {"rope_layout_swapped"};
    r.ops = {"rope"};
    const CaseResult one = test::check(*im, gen::materialize(*spec));
    REQUIRE_FALSE(one.error_map.empty());
    for (int i = 0; i < 5; ++i) r.results.push_back(one);
    const json j = to_json(r);
    int with = 0;
    for (const auto& c : j["cases"]) with += c.contains("error_map");
    REQUIRE(with == j["error_maps"]["per_impl_op"].get<int>());
    REQUIRE(j["error_maps"]["omitted"].get<int>() == 5 - with);
}

TEST_CASE("error colours: calm up to the bound, hot past it, NaN apart", "[report]") {
    namespace svg = report::svg;
    auto rgb = [](const std::string& hex) {
        REQUIRE(hex.size() == 7);
        return std::array<int, 3>{std::stoi(hex.substr(1, 2), nullptr, 16), std::stoi(hex.substr(3, 2), nullptr, 16),
                                  std::stoi(hex.substr(5, 2), nullptr, 16)};
    };
    auto calm = [&](const std::string& c) {
        const auto v = rgb(c);
        return v[2] >= v[0] && v[2] >= v[1];
    };  // blue-grey
    auto hot = [&](const std::string& c) {
        const auto v = rgb(c);
        return v[0] > v[2] + 20;
    };  // yellow..red
    REQUIRE(svg::colour(0, 1e-6) == "#ffffff");
    REQUIRE(calm(svg::colour(1e-9, 1e-6)));
    REQUIRE(calm(svg::colour(1e-6, 1e-6)));
    REQUIRE(hot(svg::colour(2e-6, 1e-6)));
    REQUIRE(hot(svg::colour(1.0, 1e-6)));
    REQUIRE(svg::colour(NAN, 1e-6) != svg::colour(1.0, 1e-6));
    // Darker with the error: the sum of channels falls.
    auto sum = [&](const std::string& c) {
        const auto v = rgb(c);
        return v[0] + v[1] + v[2];
    };
    REQUIRE(sum(svg::colour(1e-3, 1e-6, 6)) > sum(svg::colour(1.0, 1e-6, 6)));
    REQUIRE(sum(svg::colour(1e-8, 1e-6)) > sum(svg::colour(1e-6, 1e-6)));
}

TEST_CASE("XML escaping is always well-formed", "[report]") {
    using report::xml_attr;
    using report::xml_escape;
    REQUIRE(xml_escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;");
    REQUIRE(xml_escape("]]>") == "]]&gt;");
    REQUIRE(xml_escape(std::string("a\x01z")) == "a\xEF\xBF\xBDz");                  // control character
    REQUIRE(xml_escape(std::string("a\xff\xfez")) == "a\xEF\xBF\xBD\xEF\xBF\xBDz");  // not UTF-8
    REQUIRE(xml_escape(std::string("\xC0\xAF")) == "\xEF\xBF\xBD\xEF\xBF\xBD");      // overlong '/'
    REQUIRE(xml_escape("µ ✓ 𝔵") == "µ ✓ 𝔵");                                         // valid UTF-8 kept
    REQUIRE(xml_escape("a\nb\tc") == "a\nb\tc");
    REQUIRE(xml_attr("a\nb\tc\rd") == "a&#10;b&#9;c&#13;d");
}

TEST_CASE("JUnit XML parses, counts and carries the failure", "[report]") {
    const json r =
        run_report("rope_layout_swapped", "rope(T=3,n=1,hd=8,layout=neox,theta=10000,pos=2,mag=1,outliers=0,seed=1)");
    const std::string x = render_junit(r);
    REQUIRE(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites ", 0) == 0);
    REQUIRE(x.find("<failure ") != std::string::npos);
    REQUIRE(x.find("max_abs") != std::string::npos);
    REQUIRE(x.find("allowed") != std::string::npos);
    REQUIRE(python_parse(x, R"(
s = root.findall('testsuite')
assert len(s) == 1 and s[0].get('name') == 'conform.rope_layout_swapped.rope', s
assert root.get('tests') == '1' and root.get('failures') == '1', root.attrib
f = s[0].find('testcase').find('failure')
assert f is not None and 'rope_layout_swapped' in f.get('message'), f
assert 'replay:' in f.text and 'max_abs' in f.text and 'diagnosis:' in f.text, f.text
)") == "");

    const std::string h = render_junit(hostile_report());
    REQUIRE(python_parse(h, R"(
cases = root.find('testsuite').findall('testcase')
assert len(cases) == 3, cases
assert cases[0].get('name').startswith('rope(T=1]]>,x=<b>|pipe|'), cases[0].get('name')
assert cases[0].find('error') is not None, 'an implementation error is a JUnit error'
assert ']]>' in cases[0].find('error').text
assert 'max_abs nan > allowed 1.00e-06' in cases[1].find('failure').get('message'), cases[1].find('failure').attrib
assert cases[2].find('failure') is None and cases[2].find('error') is None
assert root.get('errors') == '1' and root.get('failures') == '1' and root.get('time') == '0.000000', root.attrib
)") == "");
}

TEST_CASE("Markdown is a short table that survives hostile text", "[report]") {
    const std::string m = render_markdown(hostile_report());
    REQUIRE(m.find("| op | impl | cases | pass |") != std::string::npos);
    REQUIRE(m.find("<diagnosis>") == std::string::npos);  // as text, not as a tag
    REQUIRE(m.find("&lt;diagnosis&gt;") != std::string::npos);
    // Every table row has as many unescaped cell separators as the header.
    std::istringstream in(m);
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] != '|') continue;
        int bars = 0;
        for (size_t i = 0; i < line.size(); ++i) bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
        REQUIRE(bars == 10);
        ++rows;
    }
    REQUIRE(rows == 3);  // header, rule, one row

    // A large failing run stays comment-sized (GitHub takes 65536 characters):
    // one line per failing (op, impl), capped; many rows, only the failing ones.
    json big = hostile_report();
    json c = big["cases"][0];
    for (int i = 0; i < 300; ++i)
        for (int k = 0; k < 20; ++k) {
            c["impl"] = "impl" + std::to_string(i);
            c["case_id"] = "rope(seed=" + std::to_string(k) + ")";
            c["pass"] = i % 2 == 0;
            big["cases"].push_back(c);
        }
    const std::string mb = render_markdown(big);
    INFO(mb.substr(mb.size() > 3000 ? mb.size() - 3000 : 0));
    REQUIRE(mb.size() < 30000);
    REQUIRE(mb.find("more failing op × impl rows") != std::string::npos);
    REQUIRE(mb.find("201 op × impl rows not shown") != std::string::npos);  // 150 passing, 51 failing past 100
}

TEST_CASE("HTML is one self-contained page with the error maps", "[report]") {
    const json r =
        run_report("gqa_head_mapping_tiled", "attention(T=8,S=8,H=4,KV=2,hd=8,qpos=0,kpos=0,mag=1,outliers=0,seed=3)");
    const std::string h = render_html(r);
    REQUIRE(h.rfind("<!DOCTYPE html>", 0) == 0);
    REQUIRE(h.find("<svg") != std::string::npos);
    REQUIRE(h.find("class=\"map\"") != std::string::npos);      // the error map
    REQUIRE(h.find("error vs position") != std::string::npos);  // and the profiles
    REQUIRE(h.find("error vs dim") != std::string::npos);
    REQUIRE(h.find("error vs head") != std::string::npos);
    REQUIRE(h.find("<script") == std::string::npos);
    REQUIRE(h.find(" src=") == std::string::npos);
    REQUIRE(h.find("url(") == std::string::npos);
    // The only URL is SVG's namespace name, which is never fetched.
    for (size_t at = h.find("http"); at != std::string::npos; at = h.find("http", at + 1))
        REQUIRE(h.compare(at, 26, "http://www.w3.org/2000/svg") == 0);

    const std::string e = render_html(hostile_report());
    REQUIRE(e.find("<script>") == std::string::npos);
    REQUIRE(e.find("&lt;script&gt;") != std::string::npos);
    REQUIRE(e.find("evil&lt;impl&gt;") != std::string::npos);
}

TEST_CASE("report formats: parsing, paths, the output directory", "[report]") {
    std::string err;
    REQUIRE(*parse_report_formats("json", &err) == std::vector<std::string>{"json"});
    REQUIRE(*parse_report_formats("html,json,md", &err) == std::vector<std::string>{"json", "md", "html"});
    REQUIRE(*parse_report_formats("all", &err) == std::vector<std::string>{"json", "junit", "md", "html"});
    REQUIRE_FALSE(parse_report_formats("json,pdf", &err));
    REQUIRE(err.find("unknown format 'pdf'") != std::string::npos);
    REQUIRE_FALSE(parse_report_formats("json,,md", &err));
    REQUIRE_FALSE(parse_report_formats("", &err));
    REQUIRE(report_path("out", "junit") == "out/conform.xml");

    TempDir d;
    REQUIRE(out_dir_problem(d.path.string()) == "");
    REQUIRE(out_dir_problem((d.path / "new" / "deeper").string()) == "");
    REQUIRE_FALSE(fs::exists(d.path / "new"));  // checking creates nothing
    std::ofstream(d.path / "a-file") << "keep me";
    REQUIRE(out_dir_problem((d.path / "a-file").string()).find("not a directory") != std::string::npos);
    REQUIRE(out_dir_problem((d.path / "a-file" / "sub").string()).find("not a directory") != std::string::npos);

    // Writes only its own files; the user's stay as they were.
    std::ofstream(d.path / "notes.txt") << "mine";
    const auto written = write_reports(hostile_report(), {"json", "junit", "md", "html"}, d.path.string());
    REQUIRE(written.size() == 4);
    for (const auto& p : written) REQUIRE(fs::file_size(p) > 0);
    REQUIRE(slurp(d.path / "notes.txt") == "mine");
    // Not UTF-8 in a string: repaired, still JSON.
    REQUIRE(json::parse(slurp(d.path / "conform.json"))["cases"][0]["case_id"].get<std::string>().find(
                "\xEF\xBF\xBD") != std::string::npos);
    // Compact number arrays, the same document.
    const json r =
        run_report("rope_layout_swapped", "rope(T=3,n=2,hd=8,layout=neox,theta=10000,pos=2,mag=1,outliers=0,seed=1)");
    TempDir d2;
    write_reports(r, {"json"}, d2.path.string());
    REQUIRE(json::parse(slurp(d2.path / "conform.json")) == r);
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d.path)) ++files;
    REQUIRE(files == 6);  // four reports, notes.txt, a-file: no temporaries left
}
