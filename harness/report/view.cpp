#include "report/view.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace conform::report {

double number(const json& v, double fallback) {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        if (s == "nan") return NAN;
        if (s == "inf") return INFINITY;
        if (s == "-inf") return -INFINITY;
    }
    return fallback;
}

double number(const json& j, const char* key, double fallback) {
    if (!j.is_object()) return fallback;
    auto it = j.find(key);
    return it == j.end() ? fallback : number(*it, fallback);
}

std::string text(const json& j, const char* key, const std::string& fallback) {
    if (!j.is_object()) return fallback;
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_null()) return fallback;
    return it->dump();
}

int64_t integer(const json& j, const char* key, int64_t fallback) {
    if (!j.is_object()) return fallback;
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return fallback;
    return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

bool flag(const json& j, const char* key, bool fallback) {
    if (!j.is_object()) return fallback;
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string sci(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return fmt::format("{:.2e}", v);
}

std::string margin_str(double m) {
    if (std::isnan(m)) return "nan";
    if (std::isinf(m)) return "inf";
    return fmt::format("{:.2f}x", m);
}

const json* worst_tensor(const json& c) {
    const json* w = nullptr;
    auto it = c.find("tensors");
    if (it == c.end() || !it->is_array()) return nullptr;
    for (const json& t : *it) {
        // NaN margins (a non-finite output) count as the worst.
        const double m = number(t, "margin", INFINITY);
        if (!w || std::isnan(m) || m < number(*w, "margin", INFINITY)) w = &t;
        if (std::isnan(m)) break;
    }
    return w;
}

const json* failing_tensor(const json& c) {
    const std::string name = text(c, "first_failing");
    auto it = c.find("tensors");
    if (!name.empty() && it != c.end() && it->is_array())
        for (const json& t : *it)
            if (text(t, "name") == name) return &t;
    return worst_tensor(c);
}

std::string first_diagnosis(const json& c) {
    if (flag(c, "pass", false)) return "";
    if (auto d = c.find("diagnosis"); d != c.end() && d->is_object()) {
        if (auto ms = d->find("matches"); ms != d->end() && ms->is_array() && !ms->empty()) {
            std::string ids;
            for (const json& m : *ms) {
                const std::string id = text(m, "id");
                if (ids.find(id) == std::string::npos) ids += (ids.empty() ? "" : ", ") + id;
            }
            const json& m0 = (*ms)[0];
            return fmt::format("{}: matches {} (max err {} vs {} under the config, on {})", ids, text(m0, "change"),
                               sci(number(m0, "err_hypothesis", NAN)), sci(number(m0, "err_config", NAN)),
                               text(m0, "tensor"));
        }
        if (auto ls = d->find("lines"); ls != d->end() && ls->is_array() && !ls->empty() && (*ls)[0].is_string())
            return (*ls)[0].get<std::string>();
    }
    const std::string err = text(c, "error");
    if (!err.empty()) return "error: " + err;
    if (const json* t = failing_tensor(c)) {
        const std::string why = text(*t, "why");
        if (!why.empty()) return text(*t, "name") + ": " + why;
    }
    return "not diagnosed";
}

std::string case_name(const json& c) {
    const std::string file = text(c, "file");
    if (!file.empty()) return file + ":/" + text(c, "group");
    return text(c, "case_id");
}

namespace {

std::string location(const json& w) {
    if (!w.is_object()) return "?";
    const int64_t token = integer(w, "token", -1), head = integer(w, "head", -1);
    if (head >= 0) return fmt::format("(token {}, head {}, dim {})", token, head, integer(w, "dim", -1));
    return fmt::format("(token {}, col {})", token, integer(w, "col", -1));
}

}  // namespace

std::string location_str(const json& w) {
    return location(w);
}

double decisive_err(const json& t) {
    auto d = t.find("decisive");
    if (d != t.end() && d->is_object() && d->contains("err")) return number(*d, "err", NAN);
    return number(t, "max_abs", NAN);
}

std::string verdict_line(const json& t) {
    const double allowed = number(t.value("bound", json::object()), "allowed", NAN);
    auto d = t.find("decisive");
    if (d == t.end() || !d->is_object())  // a report from before per-element bounds
        return fmt::format("{}: max_abs {} > allowed {}", text(t, "name"), sci(number(t, "max_abs", NAN)),
                           sci(allowed));
    return fmt::format("{}: err {} > allowed {} at {}, max_abs {}", text(t, "name"), sci(decisive_err(t)), sci(allowed),
                       location(*d), sci(number(t, "max_abs", NAN)));
}

std::string failure_text(const json& c) {
    const std::string aq = text(c, "act_quant");
    std::string s = fmt::format("{} {} {} [{}{}]  {}\n", flag(c, "pass") ? "PASS" : "FAIL", text(c, "impl"),
                                text(c, "op"), text(c, "dtype"), aq.empty() ? "" : ", " + aq + " activations",
                                text(c, "case_id"));
    if (!text(c, "file").empty()) s += fmt::format("  fixture:   {}:/{}\n", text(c, "file"), text(c, "group"));
    if (integer(c, "shrink_tried") > 0 || integer(c, "shrink_steps") > 0 || !text(c, "shrink_stopped").empty()) {
        s += fmt::format("  shrunk:    {} steps", integer(c, "shrink_steps"));
        if (integer(c, "shrink_tried") > 0)
            s += fmt::format(" ({} candidates, {:.1f} s)", integer(c, "shrink_tried"), number(c, "shrink_seconds", 0));
        if (!text(c, "shrink_stopped").empty()) s += ", stopped at " + text(c, "shrink_stopped");
        s += "\n";
    }
    if (!text(c, "same_as").empty()) s += fmt::format("  same as:   {}\n", text(c, "same_as"));
    if (!text(c, "route_taken").empty()) s += fmt::format("  experts:   {}\n", text(c, "route_taken"));
    s += fmt::format("  inputs:    {}\n", text(c, "inputs"));
    if (!text(c, "error").empty()) s += fmt::format("  error:     {}\n", text(c, "error"));
    if (!text(c, "first_failing").empty()) s += fmt::format("  first failing tensor: {}\n", text(c, "first_failing"));
    if (auto ts = c.find("tensors"); ts != c.end() && ts->is_array())
        for (const json& t : *ts) {
            const json b = t.value("bound", json::object());
            const bool ok = flag(t, "pass");
            s += fmt::format(
                "  {:<8} {} err {} at {} (allowed {} = {}x row baseline {} + max(floor {}, a-priori {})), max_abs {}, "
                "nmse {} (allowed {}), cos {:.6f}, max_rel {}, mismatches {} ({:.1f}%), worst at {}{}\n",
                text(t, "name"), ok ? "ok  " : "FAIL", sci(decisive_err(t)),
                location(t.value("decisive", t.value("worst", json::object()))), sci(number(b, "allowed", NAN)),
                number(b, "k", NAN),
                sci(b.contains("baseline_row") ? number(b, "baseline_row", NAN)
                                               : std::max(number(b, "baseline_library", NAN),
                                                          number(b, "baseline_sequential", NAN))),
                sci(number(b, "floor", NAN)), sci(number(b, "noise", NAN)), sci(number(t, "max_abs", NAN)),
                sci(number(t, "nmse", NAN)), sci(number(b, "nmse_allowed", NAN)), number(t, "cosine", NAN),
                sci(number(t, "max_rel", NAN)), integer(t, "mismatches"), number(t, "mismatch_pct", 0.0),
                location(t.value("worst", json::object())), ok ? "" : "  <- " + text(t, "why"));
        }
    if (auto d = c.find("diagnosis"); d != c.end() && d->is_object())
        if (auto ls = d->find("lines"); ls != d->end() && ls->is_array())
            for (const json& l : *ls)
                if (l.is_string()) s += "  diagnosis: " + l.get<std::string>() + "\n";
    if (!text(c, "replay").empty()) s += "  replay:    " + text(c, "replay") + "\n";
    return s;
}

std::vector<Row> summarise(const json& report) {
    auto order_of = [&](const char* key) {
        std::map<std::string, size_t> order;
        if (auto it = report.find(key); it != report.end() && it->is_array())
            for (const json& v : *it)
                if (v.is_string()) order.emplace(v.get<std::string>(), order.size());
        return order;
    };
    const auto op_order = order_of("ops"), impl_order = order_of("impls");
    auto rank = [](const std::map<std::string, size_t>& order, const std::string& s) {
        auto it = order.find(s);
        return it == order.end() ? order.size() : it->second;
    };
    std::vector<Row> rows;
    std::map<std::pair<std::string, std::string>, size_t> index;
    auto cases = report.find("cases");
    const json no_cases = json::array();
    for (const json& c : cases != report.end() && cases->is_array() ? *cases : no_cases) {
        const std::string op = text(c, "op"), impl = text(c, "impl");
        auto [it, fresh] = index.emplace(std::make_pair(op, impl), rows.size());
        if (fresh) {
            rows.emplace_back();
            rows.back().op = op;
            rows.back().impl = impl;
        }
        Row& row = rows[it->second];
        row.cases++;
        row.all.push_back(&c);
        row.seconds += number(c, "seconds", 0.0);
        const bool pass = flag(c, "pass");
        if (pass)
            row.passed++;
        else
            row.failures.push_back(&c);
        const json* w = worst_tensor(c);
        double m = w ? number(*w, "margin", INFINITY) : INFINITY;
        if (!text(c, "error").empty() || std::isnan(m)) m = 0.0;  // an error or a NaN: no margin at all
        if (row.cases == 1 || m < row.worst_margin) {
            row.worst_margin = m;
            row.err = w ? decisive_err(*w) : NAN;  // where the margin is decided, as the terminal's table
            row.allowed = w ? number(w->value("bound", json::object()), "allowed", NAN) : NAN;
            row.tensor = w ? text(*w, "name") : "-";
        }
    }
    auto row_of = [&](const std::string& op, const std::string& impl) -> Row& {
        auto [it, fresh] = index.emplace(std::make_pair(op, impl), rows.size());
        if (fresh) {
            rows.emplace_back();
            rows.back().op = op;
            rows.back().impl = impl;
            rows.back().tensor = "-";
        }
        return rows[it->second];
    };
    if (auto nr = report.find("not_run"); nr != report.end() && nr->is_array())
        for (const json& n : *nr) row_of(text(n, "op"), text(n, "impl")).declined += static_cast<int>(integer(n, "cases"));
    if (auto none = report.find("nothing_ran"); none != report.end() && none->is_array())
        for (const json& n : *none)
            for (Row& row : rows)
                if (row.impl == text(n, "impl") && (text(n, "op").empty() || row.op == text(n, "op"))) row.nothing_ran = true;
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
        const auto ka = std::make_tuple(rank(op_order, a.op), a.op, rank(impl_order, a.impl), a.impl);
        const auto kb = std::make_tuple(rank(op_order, b.op), b.op, rank(impl_order, b.impl), b.impl);
        return ka < kb;
    });
    return rows;
}

RunVerdict run_verdict(const json& report, const std::vector<Row>& rows) {
    RunVerdict v;
    bool rows_ok = true;
    for (const Row& row : rows) {
        v.cases += row.cases;
        v.passed += row.passed;
        rows_ok = rows_ok && row.ok();
    }
    if (v.passed < v.cases) v.why.push_back(fmt::format("{} of {} cases fail", v.cases - v.passed, v.cases));
    if (auto none = report.find("nothing_ran"); none != report.end() && none->is_array())
        for (const json& n : *none)
            v.why.push_back(text(n, "op").empty()
                                ? fmt::format("no case ran for {} ({})", text(n, "impl"), text(n, "reason"))
                                : fmt::format("no property case of {} ran for {} ({})", text(n, "op"), text(n, "impl"),
                                              text(n, "reason")));
    if (auto t = report.find("tampered"); t != report.end() && t->is_array())
        for (const json& l : *t)
            if (l.is_string()) v.why.push_back(l.get<std::string>());
    // conform's own verdict where it wrote one; a report without it (an
    // older writer) is judged from what it holds.
    auto p = report.find("pass");
    v.pass = p != report.end() && p->is_boolean() ? p->get<bool>() && v.why.empty() : rows_ok && v.why.empty();
    if (!v.pass && v.why.empty()) v.why.push_back("the run did not pass");
    return v;
}

}  // namespace conform::report
