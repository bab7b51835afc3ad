// JUnit XML, the common dialect CI systems read (Jenkins, GitLab, GitHub
// test-report actions): testsuites > testsuite > testcase > failure | error.
// tests/junit.xsd is the schema the tests validate it against.
#include <fmt/format.h>

#include "report/formats.h"
#include "report/view.h"
#include "report/xml.h"

namespace conform {

namespace {

using namespace report;

// JUnit's time is seconds as a plain decimal (no exponent, no NaN).
std::string seconds(double s) {
    return fmt::format("{:.6f}", std::isfinite(s) && s > 0 ? s : 0.0);
}

// An implementation that threw, broke a buffer contract or produced no
// comparable output errored; one whose output was judged and missed failed.
bool errored(const json& c) {
    auto ts = c.find("tensors");
    return !text(c, "error").empty() && (ts == c.end() || !ts->is_array() || ts->empty());
}

std::string message(const json& c) {
    std::string m;
    if (!text(c, "error").empty()) m = text(c, "error");
    if (const json* t = failing_tensor(c); t && !flag(*t, "pass", true))
        m += (m.empty() ? "" : "; ") + verdict_line(*t);
    const std::string d = first_diagnosis(c);
    if (!d.empty() && d.rfind("error: ", 0) != 0) m += (m.empty() ? "" : "; ") + d;
    return m;
}

}  // namespace

std::string render_junit(const json& r) {
    const std::vector<Row> rows = summarise(r);
    int tests = 0, failures = 0, errors = 0;
    double total = 0;
    for (const Row& row : rows) {
        tests += row.cases;
        total += row.seconds;
        for (const json* c : row.failures) (errored(*c) ? errors : failures)++;
    }
    // What failed the run besides its cases (nothing ran, a tampered report
    // directory): a test case each, failing, so CI's count agrees with
    // conform's exit code.
    const RunVerdict v = run_verdict(r, rows);
    std::vector<std::string> run_failures;
    for (const auto& why : v.why)
        if (why.find(" cases fail") == std::string::npos) run_failures.push_back(why);
    tests += static_cast<int>(run_failures.size());
    failures += static_cast<int>(run_failures.size());
    std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    x += fmt::format(
        "<testsuites name=\"conform\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{}\">\n", tests,
        failures, errors, seconds(number(r, "seconds", total)));
    if (!run_failures.empty()) {
        x += fmt::format("  <testsuite name=\"conform.run\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" "
                         "time=\"0\">\n",
                         run_failures.size(), run_failures.size());
        for (size_t i = 0; i < run_failures.size(); ++i)
            x += fmt::format("    <testcase name=\"run check {}\" classname=\"conform.run\" time=\"0\">\n      <failure "
                             "message=\"{}\" type=\"run\">{}</failure>\n    </testcase>\n",
                             i + 1, xml_attr(run_failures[i]), xml_escape(run_failures[i]));
        x += "  </testsuite>\n";
    }
    for (const Row& row : rows) {
        int f = 0, e = 0;
        for (const json* c : row.failures) (errored(*c) ? e : f)++;
        const std::string suite = "conform." + row.impl + "." + row.op;
        x += fmt::format(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{}\">\n",
            xml_attr(suite), row.cases, f, e, seconds(row.seconds));
        x += "    <properties>\n";
        auto prop = [&](const std::string& name, const std::string& value) {
            x += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", xml_attr(name), xml_attr(value));
        };
        prop("impl", row.impl);
        prop("op", row.op);
        prop("seed", text(r, "seed"));
        prop("dtype", text(r, "dtype"));
        prop("reference", text(r, "reference"));
        prop("schema", text(r, "schema"));
        x += "    </properties>\n";
        for (const json* c : row.all) {
            x += fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"", xml_attr(case_name(*c)),
                             xml_attr(suite), seconds(number(*c, "seconds", 0.0)));
            if (flag(*c, "pass")) {
                x += "/>\n";
                continue;
            }
            const char* tag = errored(*c) ? "error" : "failure";
            x += fmt::format(">\n      <{} message=\"{}\" type=\"{}\">", tag, xml_attr(message(*c)),
                             errored(*c) ? "implementation error" : "nonconformance");
            x += xml_escape(failure_text(*c));
            x += fmt::format("</{}>\n    </testcase>\n", tag);
        }
        x += "  </testsuite>\n";
    }
    x += "</testsuites>\n";
    return x;
}

}  // namespace conform
