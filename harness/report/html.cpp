// One self-contained HTML page: inline CSS and SVG only, no script and
// nothing fetched, so it opens from a CI artifact or a mail attachment.
// The summary table, then each failing case with its error map — the
// pattern is the point: a swapped RoPE layout errs at every pair and every
// position, a wrong theta at the low-frequency dims and more with position,
// a tiled GQA mapping on whole heads.
#include <fmt/format.h>
#include <map>

#include "report/formats.h"
#include "report/svg.h"
#include "report/view.h"
#include "report/xml.h"

namespace conform {

namespace {

using namespace report;

constexpr size_t kMaxListed = 200;  // failures without a map, listed in one table
constexpr int kErrorSections = 3;   // per op × impl: failures to run, shown in full

const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1b1b1b; max-width: 1400px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 0 0 6px; } h4 { font-size: 14px; margin: 14px 0 4px; }
.meta, .note { color: #555; } code, pre { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 6px 0; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #17692b; font-weight: 600; } .fail { color: #b3001b; font-weight: 600; }
section.case { border: 1px solid #ccc; border-radius: 6px; padding: 12px 14px; margin: 14px 0; }
ul.diag { margin: 4px 0 8px; padding-left: 20px; } ul.diag li { margin: 2px 0; }
.plots { display: flex; flex-wrap: wrap; gap: 8px; }
svg text.tick { font: 10px sans-serif; fill: #333; } svg text.ax { font: 11px sans-serif; fill: #222; }
figure { margin: 8px 0; } figcaption { color: #444; margin-bottom: 4px; }
)";

std::string esc(const std::string& s) {
    return xml_escape(s);
}

std::vector<double> doubles(const json& a) {
    std::vector<double> v;
    if (a.is_array())
        for (const auto& x : a) v.push_back(x.is_null() ? NAN : number(x, NAN));
    return v;
}

// The error map and the three profiles of one tensor.
std::string figures(const json& m, const std::string& op) {
    std::string s;
    const std::string tensor = text(m, "tensor");
    const bool has_heads = flag(m, "has_heads");
    const json g = m.value("grid", json::object());
    s += fmt::format(
        "<figure><figcaption>|impl &#8722; ref| on <b>{}</b> ({} &#215; {}{}), colour relative to its bound "
        "(allowed {}); largest error {}. Position down; {} across.</figcaption>",
        esc(tensor), integer(m, "rows"), integer(m, "cols"),
        has_heads ? fmt::format(" = {} heads &#215; {} dims", integer(m, "heads"), integer(m, "head_dim"))
                  : std::string(),
        sci(number(m, "allowed", NAN)), sci(number(m, "max_err", NAN)),
        has_heads ? "heads, each its dims 0 &#8230; head_dim&#8722;1" : "columns");
    const double hot = svg::hot_decades(m);
    s += svg::heatmap(m) + "<br>" + svg::legend(hot);
    if (integer(g, "row_pool", 1) > 1 || integer(g, "dim_pool", 1) > 1 || integer(g, "head_pool", 1) > 1)
        s +=
            "<div class=\"note\">Downsampled: each cell is the maximum over the tokens / heads / dims it covers.</div>";
    s += "</figure><div class=\"plots\">";
    const double allowed = number(m, "allowed", 0.0);
    const json bp = m.value("by_position", json::object());
    {
        svg::Plot p;
        p.title = "error vs position (max over heads and dims)";
        p.xlabel = integer(bp, "pool", 1) > 1 ? fmt::format("position ({} tokens per point)", integer(bp, "pool", 1))
                                              : "position";
        for (const auto& v : bp.value("positions", json::array())) p.x.push_back(number(v, 0.0));
        p.y = doubles(bp.value("max", json::array()));
        p.allowed = allowed;
        p.hot_decades = hot;
        s += svg::line_plot(p);
    }
    const json bd = m.value("by_dim", json::object());
    {
        svg::Plot p;
        p.title = has_heads ? "error vs dim (max over positions and heads)" : "error vs column (max over positions)";
        const int64_t pool = std::max<int64_t>(1, integer(bd, "pool", 1));
        p.y = doubles(bd.value("max", json::array()));
        for (size_t i = 0; i < p.y.size(); ++i) p.x.push_back(static_cast<double>(static_cast<int64_t>(i) * pool));
        p.xlabel = has_heads ? "dim within head" : "column";
        if (pool > 1) p.xlabel += fmt::format(", {} per point", pool);
        p.allowed = allowed;
        p.hot_decades = hot;
        s += svg::line_plot(p);
    }
    if (auto bh = m.find("by_head"); bh != m.end() && bh->is_array() && !bh->empty()) {
        svg::Plot p;
        p.title = "error vs head (max over positions and dims)";
        p.xlabel = "head";
        p.y = doubles(*bh);
        for (size_t i = 0; i < p.y.size(); ++i) p.x.push_back(static_cast<double>(i));
        p.allowed = allowed;
        p.hot_decades = hot;
        p.bars = true;
        s += svg::line_plot(p);
    }
    s += "</div>";
    if (has_heads && (op == "rope" || op == "block" || op == "decode"))
        s += "<div class=\"note\">RoPE pair i of a dim within a head: NeoX pairs (i, i + head_dim/2), interleaved "
             "(2i, 2i + 1); a higher i turns more slowly (lower frequency), and i = 0 is the same for every "
             "theta.</div>";
    return s;
}

std::string tensor_table(const json& c) {
    auto ts = c.find("tensors");
    if (ts == c.end() || !ts->is_array() || ts->empty()) return "";
    std::string s =
        "<table class=\"tensors\"><tr><th>tensor</th><th>verdict</th><th>err</th><th>allowed</th><th>at</th>"
        "<th>margin</th><th>max |err|</th><th>nmse</th><th>cosine</th><th>mismatches</th><th>why</th></tr>";
    for (const json& t : *ts) {
        const json b = t.value("bound", json::object());
        // The decisive element (largest err / allowed; bounds are per element), else the worst.
        const std::string where = location_str(t.value("decisive", t.value("worst", json::object())));
        const bool ok = flag(t, "pass");
        s += fmt::format(
            "<tr><td>{}</td><td class=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td>"
            "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.6f}</td>"
            "<td class=\"n\">{} ({:.1f}%)</td><td>{}</td></tr>",
            esc(text(t, "name")), ok ? "pass" : "fail", ok ? "ok" : "FAIL", sci(decisive_err(t)),
            sci(number(b, "allowed", NAN)), esc(where), margin_str(number(t, "margin", NAN)),
            sci(number(t, "max_abs", NAN)), sci(number(t, "nmse", NAN)), number(t, "cosine", NAN),
            integer(t, "mismatches"), number(t, "mismatch_pct", 0.0), esc(text(t, "why")));
    }
    return s + "</table>";
}

std::string case_section(const json& c, const std::string& anchor) {
    std::string s = fmt::format(
        "<section class=\"case\" id=\"{}\"><h3><span class=\"fail\">FAIL</span> {} &#183; {} "
        "&#183; <code>{}</code></h3>",
        anchor, esc(text(c, "impl")), esc(text(c, "op")), esc(case_name(c)));
    s += fmt::format(
        "<div class=\"meta\">dtype {} &#183; inputs <code>{}</code>{}{}</div>", esc(text(c, "dtype")),
        esc(text(c, "inputs")),
        text(c, "first_failing").empty() ? ""
                                         : " &#183; first failing tensor <b>" + esc(text(c, "first_failing")) + "</b>",
        integer(c, "shrink_steps") > 0 ? fmt::format(" &#183; shrunk in {} steps", integer(c, "shrink_steps"))
                                       : std::string());
    if (!text(c, "error").empty()) s += "<p class=\"fail\">error: " + esc(text(c, "error")) + "</p>";
    std::string lines;
    if (auto d = c.find("diagnosis"); d != c.end() && d->is_object())
        if (auto ls = d->find("lines"); ls != d->end() && ls->is_array())
            for (const json& l : *ls)
                if (l.is_string()) lines += "<li>" + esc(l.get<std::string>()) + "</li>";
    if (!lines.empty()) s += "<ul class=\"diag\">" + lines + "</ul>";
    if (!text(c, "replay").empty()) s += "<div>replay: <code>" + esc(text(c, "replay")) + "</code></div>";
    s += tensor_table(c);
    if (auto m = c.find("error_map"); m != c.end() && m->is_object()) s += figures(*m, text(c, "op"));
    if (auto m = c.find("unshrunk_error_map"); m != c.end() && m->is_object()) {
        s += fmt::format(
            "<h4>The case it was shrunk from: <code>{}</code></h4><div class=\"note\">Larger, so the "
            "pattern over positions and heads shows.</div>",
            esc(text(*m, "case_id")));
        s += figures(*m, text(c, "op"));
    }
    s += "<details><summary>as text</summary><pre>" + esc(failure_text(c)) + "</pre></details></section>";
    return s;
}

}  // namespace

std::string render_html(const json& r) {
    const std::vector<Row> rows = summarise(r);
    const RunVerdict v = run_verdict(r, rows);
    const bool pass = v.pass;
    const int cases = v.cases, passed = v.passed;
    std::string h =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
    h += fmt::format("<title>conform: {} ({} of {} cases conform)</title><style>{}</style></head><body>\n",
                     pass ? "PASS" : "FAIL", passed, cases, kStyle);
    h += fmt::format("<h1>conform: <span class=\"{}\">{}</span> &#8212; {} of {} cases conform</h1>\n",
                     pass ? "pass" : "fail", pass ? "PASS" : "FAIL", passed, cases);
    h +=
        fmt::format("<div class=\"meta\">seed {} &#183; dtype {} &#183; reference {} &#183; {} &#183; {:.1f} s</div>\n",
                    esc(text(r, "seed")), esc(text(r, "dtype")), esc(text(r, "reference")), esc(text(r, "schema")),
                    number(r, "seconds", 0.0));
    if (!v.why.empty()) {
        h += "<ul class=\"why\">";
        for (const auto& why : v.why) h += "<li class=\"fail\">" + esc(why) + "</li>";
        h += "</ul>\n";
    }

    // Anchors of failing cases, in report order.
    std::map<const json*, std::string> anchor;
    for (const Row& row : rows)
        for (const json* c : row.failures) anchor.emplace(c, fmt::format("f{}", anchor.size() + 1));

    h += "<h2>Summary</h2><table class=\"summary\"><tr><th>op</th><th>impl</th><th>cases</th><th>pass</th>"
         "<th>worst err</th><th>allowed</th><th>margin</th><th>tensor</th><th>first failure</th></tr>\n";
    for (const Row& row : rows) {
        const bool ok = row.ok();
        std::string first = row.failures.empty() ? std::string()
                                                 : fmt::format("<a href=\"#{}\">{}</a>", anchor[row.failures.front()],
                                                               esc(first_diagnosis(*row.failures.front())));
        if (row.nothing_ran) first = "no property case ran" + std::string(first.empty() ? "" : "; ") + first;
        if (row.declined) first += fmt::format("{}({} declined)", first.empty() ? "" : " ", row.declined);
        h += fmt::format(
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n {}\">{}</td><td class=\"n\">{}</td>"
            "<td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(row.op), esc(row.impl), row.cases, ok ? "pass" : "fail", row.passed, sci(row.err), sci(row.allowed),
            row.cases ? margin_str(row.worst_margin) : "-", esc(row.tensor), first);
    }
    h += "</table><div class=\"note\">margin = allowed / err of the worst case (below 1 fails).</div>\n";
    for (const json& n : r.value("not_run", json::array()))
        h += fmt::format("<div class=\"note\">not run: {} {}: {} cases unsupported ({})</div>\n", esc(text(n, "impl")),
                         esc(text(n, "op")), integer(n, "cases"), esc(text(n, "reason")));
    for (const json& w : r.value("workers", json::array()))
        if (integer(w, "restarts") > 0)
            h += fmt::format("<div class=\"note fail\">restarted: {} {} times in {} calls (each after it crashed, hung "
                             "or broke the protocol)</div>\n",
                             esc(text(w, "impl")), integer(w, "restarts"), integer(w, "calls"));

    if (v.passed < v.cases) {
        h += "<h2>Failures</h2>\n";
        std::string rest;
        size_t listed = 0, unlisted = 0;
        for (const Row& row : rows) {
            int errors_shown = 0;  // implementation errors have no map; the first few still get a section
            for (const json* c : row.failures) {
                const bool map = c->contains("error_map") || c->contains("unshrunk_error_map");
                if (map || (!text(*c, "error").empty() && errors_shown++ < kErrorSections)) {
                    h += case_section(*c, anchor[c]) + "\n";
                } else if (listed < kMaxListed) {
                    ++listed;
                    rest += fmt::format(
                        "<tr id=\"{}\"><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td>"
                        "<td><code>{}</code></td></tr>\n",
                        anchor[c], esc(row.op), esc(row.impl), esc(case_name(*c)), esc(first_diagnosis(*c)),
                        esc(text(*c, "replay")));
                } else {
                    ++unlisted;
                }
            }
        }
        if (!rest.empty())
            h += "<h2>Further failures</h2><div class=\"note\">Without an error map (the report keeps maps for the "
                 "first failing cases of each op &#215; impl).</div><table><tr><th>op</th><th>impl</th><th>case</th>"
                 "<th>diagnosis</th><th>replay</th></tr>\n" +
                 rest + "</table>\n";
        if (unlisted)
            h += fmt::format("<p class=\"note\">&#8230;and {} more failures (see the JSON report).</p>\n", unlisted);
    }
    h += "</body></html>\n";
    return h;
}

}  // namespace conform
