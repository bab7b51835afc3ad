// Markdown for a pull-request comment: the op × impl table, then one line per
// failing (op, impl) — its first failure, what diagnosis named, the replay.
// Bounded in length whatever the run: long cells are cut, and past
// kMaxFailures failing rows the rest are counted, not listed.
#include <fmt/format.h>

#include "report/formats.h"
#include "report/view.h"

namespace conform {

namespace {

using namespace report;

constexpr size_t kMaxFailures = 20;
constexpr size_t kMaxRows = 100;  // table rows; past it only failing rows are shown
constexpr size_t kMaxCell = 160;

// One line, cut to n characters (on a UTF-8 boundary).
std::string one_line(std::string s, size_t n = kMaxCell) {
    for (char& ch : s)
        if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
    if (s.size() > n) {
        size_t cut = n;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
        s = s.substr(0, cut) + "…";
    }
    return s;
}

// Plain text in a table cell or list item: no table breaks, no HTML, no
// emphasis (GitHub does not emphasise inside words, so ids keep their '_').
std::string md_text(const std::string& s) {
    std::string out;
    for (char ch : one_line(s)) {
        switch (ch) {
            case '|':
                out += "\\|";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '&':
                out += "&amp;";
                break;
            case '*':
            case '`':
            case '[':
            case ']':
            case '\\':
                out += '\\', out += ch;
                break;
            default:
                out += ch;
        }
    }
    return out;
}

// A code span that survives backticks in its content; in a table, | is escaped
// (GitHub's tables split on it even inside code).
std::string md_code(const std::string& s, bool in_table, size_t n = 400) {
    std::string body = one_line(s, n);
    size_t run = 0, longest = 0;
    for (char ch : body) {
        run = ch == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    if (in_table) {
        std::string e;
        for (char ch : body) e += ch == '|' ? std::string("\\|") : std::string(1, ch);
        body = e;
    }
    const std::string fence(longest + 1, '`');
    const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`');
    return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

}  // namespace

std::string render_markdown(const json& r) {
    const std::vector<Row> rows = summarise(r);
    const RunVerdict v = run_verdict(r, rows);
    std::string m = fmt::format("### conform: {} — {} of {} cases conform\n\n", v.pass ? "PASS" : "FAIL", v.passed,
                                v.cases);
    for (const auto& why : v.why) m += "- **" + md_text(why) + "**\n";
    if (!v.why.empty()) m += "\n";
    m += fmt::format("seed {} · dtype {} · reference {} · {:.1f} s\n\n", md_text(text(r, "seed")),
                     md_text(text(r, "dtype")), md_text(text(r, "reference")), number(r, "seconds", 0.0));
    m += "| op | impl | cases | pass | worst err | allowed | margin | tensor | first failure |\n";
    m += "|---|---|---:|---:|---:|---:|---:|---|---|\n";
    size_t hidden = 0, shown = 0;
    for (const Row& row : rows) {
        if (rows.size() > kMaxRows && (row.ok() || shown == kMaxRows)) {
            ++hidden;
            continue;
        }
        ++shown;
        std::string first = row.failures.empty() ? "" : md_text(first_diagnosis(*row.failures.front()));
        if (row.nothing_ran) first = "no property case ran" + std::string(first.empty() ? "" : "; ") + first;
        if (row.declined) first += fmt::format("{}({} declined)", first.empty() ? "" : " ", row.declined);
        m += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {}{} |\n", md_text(row.op), md_text(row.impl),
                         row.cases, row.passed, sci(row.err), sci(row.allowed),
                         row.cases ? margin_str(row.worst_margin) : "-", md_text(row.tensor),
                         row.ok() ? "" : "**FAIL** ", first);
    }
    if (hidden)
        m += fmt::format("\n{} op × impl rows not shown: past {} rows only failing ones are (see the HTML report).\n",
                         hidden, kMaxRows);
    m += "\nmargin = allowed / err of the worst case (below 1 fails).\n";
    for (const json& w : r.value("workers", json::array()))
        if (integer(w, "restarts") > 0)
            m += fmt::format("\nrestarted: {} {} times in {} calls (each after it crashed, hung or broke the protocol)\n",
                             md_text(text(w, "impl")), integer(w, "restarts"), integer(w, "calls"));
    for (const json& n : r.value("not_run", json::array()))
        m += fmt::format("\nnot run: {} {}, {} cases unsupported ({})\n", md_text(text(n, "impl")),
                         md_text(text(n, "op")), n.value("cases", 0), md_text(text(n, "reason")));
    size_t listed = 0, failing_rows = 0;
    std::string list;
    for (const Row& row : rows) {
        if (row.failures.empty()) continue;
        ++failing_rows;
        if (listed == kMaxFailures) continue;
        ++listed;
        const json& c = *row.failures.front();
        list += fmt::format("- **{} / {}** ({} of {} fail): {}\n", md_text(row.op), md_text(row.impl),
                            row.failures.size(), row.cases, md_code(case_name(c), false, 300));
        if (const json* t = failing_tensor(c); t && !flag(*t, "pass", true))
            list += "  - " + md_text(verdict_line(*t)) + "\n";
        list += "  - " + md_text(first_diagnosis(c)) + "\n";
        if (!text(c, "replay").empty()) list += "  - replay: " + md_code(text(c, "replay"), false) + "\n";
    }
    if (failing_rows) {
        m += "\n<details><summary>First failure per op × impl</summary>\n\n" + list;
        if (failing_rows > listed)
            m += fmt::format("\n…and {} more failing op × impl rows (see the JSON or HTML report).\n",
                             failing_rows - listed);
        m += "\n</details>\n";
    }
    return m;
}

}  // namespace conform
