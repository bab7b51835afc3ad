// harness/report/view.h — reading a conform-report/1 document, for the
// renderers (JUnit, Markdown, HTML). They render from the JSON, never from
// CaseResult, so a report merged from shards renders exactly like one run.
// Reads are lenient: a missing field reads as its default, so a report from
// an older writer still renders; the writers never depend on field order.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace conform::report {

using json = nlohmann::json;

// A number as the report writes it: a JSON number, or "nan" / "inf" / "-inf".
// Missing or anything else: fallback.
double number(const json& j, const char* key, double fallback = 0.0);
double number(const json& v, double fallback = 0.0);
std::string text(const json& j, const char* key, const std::string& fallback = "");
int64_t integer(const json& j, const char* key, int64_t fallback = 0);
bool flag(const json& j, const char* key, bool fallback = false);

// "1.23e-04", "nan", "inf".
std::string sci(double v);
// Margin (allowed / err): "0.00x", "inf".
std::string margin_str(double m);

// A tensor's bound is per element; the report names the decisive element
// (largest err / allowed). Its error (max_abs for older reports), and
// "out: err 5.9e+00 > allowed 9.4e-06 at (token 26, head 2, dim 34), max_abs 5.9e+00".
double decisive_err(const json& tensor);
std::string verdict_line(const json& tensor);
// "(token t, head h, dim d)" or "(token t, col c)" of a worst / decisive object.
std::string location_str(const json& where);

// The tensor with the smallest margin (the worst), or nullptr.
const json* worst_tensor(const json& c);
// The tensor named by first_failing, else the worst; nullptr when none.
const json* failing_tensor(const json& c);

// The first line that names the failure's cause: a matched bug id, else the
// first diagnosis line, else the case's error, else the first failing
// tensor's why. "" for a passing case.
std::string first_diagnosis(const json& c);

// "file:/group" for a fixture case, the case id otherwise.
std::string case_name(const json& c);

// The failure as the terminal prints it: case, inputs, each tensor's
// metrics against its bound, diagnosis lines, replay command.
std::string failure_text(const json& c);

// One row of the op × impl table.
struct Row {
    std::string op, impl;
    int cases = 0, passed = 0;
    double worst_margin = INFINITY;   // smallest margin of any case (0 when one errored)
    double err = NAN, allowed = NAN;  // of that case's worst tensor
    std::string tensor;
    std::vector<const json*> all;       // every case of the row, in report order
    std::vector<const json*> failures;  // failing cases, in report order
    double seconds = 0;
    int declined = 0;          // cases it declined (not_run)
    bool nothing_ran = false;  // no property case of it ran (nothing_ran): the row fails
    bool ok() const { return failures.empty() && !nothing_ran; }
};

// Rows in op order as the report lists ops (then any other op), impls in
// the order the report lists them (then any other); a row for every
// (op, impl) that ran or declined a case.
std::vector<Row> summarise(const json& report);

// The run's one verdict, which every format states: the report's own "pass"
// (conform decided it: cases, nothing ran, a tampered report directory), and
// the reasons a run that failed failed, one line each.
struct RunVerdict {
    bool pass = true;
    int cases = 0, passed = 0;
    std::vector<std::string> why;  // "3 of 40 cases fail", "no property case of rope ran for X (...)", tampering
};
RunVerdict run_verdict(const json& report, const std::vector<Row>& rows);

}  // namespace conform::report
