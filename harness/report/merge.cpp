#include "report/merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "core/case.h"  // InputError
#include "core/input_file.h"
#include "core/json_input.h"
#include "report/view.h"

namespace conform::report {

namespace {

using nlohmann::json;

json read_report(const std::string& path) {
    std::string text;
    try {
        text = read_input_file(path, "a shard's report", int64_t{4} << 30);
    } catch (const InputError& e) {
        throw MergeError(e.what());
    }
    // A report nests a few levels; bounded before parsing, so that no value
    // printed in a message recurses without end.
    if (const std::string why = json_shape_problem(text, kMaxJsonDepth, UINT64_MAX); !why.empty())
        throw MergeError(path + ": " + why + ", not a conform report");
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw MergeError(path + ": not JSON: " + e.what());
    }
    if (!j.is_object()) throw MergeError(path + ": expected a JSON object (a conform report)");
    const json schema = j.contains("schema") ? j["schema"] : json("(none)");
    if (schema != "conform-report/1")
        throw MergeError(path + ": schema: expected conform-report/1, found " + conform::shown(schema));
    if (!j.contains("cases") || !j["cases"].is_array()) throw MergeError(path + ": cases: missing or not an array");
    return j;
}

std::string shown(const json& v) { return v.is_null() ? "(absent)" : conform::shown(v); }

// A case's identity across shards: one implementation on one case.
using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>;
Key key_of(const json& c) {
    auto s = [&](const char* k) { return c.contains(k) && c[k].is_string() ? c[k].get<std::string>() : std::string(); };
    // A shrunk case by the case it was drawn as: two shards' failures may shrink to one id.
    const std::string id = c.contains("shrunk_from") ? s("shrunk_from") : s("case_id");
    return {s("impl"), s("op"), s("origin"), id, s("file"), s("group")};
}

}  // namespace

const std::vector<std::string>& run_identity_fields() {
    static const std::vector<std::string> f = {"seed", "cases_per_op", "dtype",    "impls",
                                               "ops",  "params",       "fixtures", "config"};
    return f;
}

json merge_reports(const std::vector<std::string>& paths) {
    if (paths.empty()) throw MergeError("no reports to merge");
    std::vector<json> docs;
    {
        for (const auto& in : paths) docs.push_back(read_report(in));
        // One run: what selects and judges the cases must agree.
        const json& first = docs[0];
        for (size_t i = 1; i < docs.size(); ++i)
            for (const std::string& field : run_identity_fields()) {
                const json a = first.contains(field) ? first[field] : json(),
                           b = docs[i].contains(field) ? docs[i][field] : json();
                if (a != b)
                    throw MergeError(fmt::format("{}: {}: expected {} (as in {}), found {} - not shards of one run",
                                                 paths[i], field, shown(a), paths[0], shown(b)));
            }
        // Every shard of one total, once each: a lost runner must not pass as a smaller run.
        std::map<int, std::string> shards;
        int total = 0;
        for (size_t i = 0; i < docs.size(); ++i) {
            const json& s = docs[i].contains("shard") ? docs[i]["shard"] : json();
            const int idx = s.is_object() ? s.value("index", -1) : 0, n = s.is_object() ? s.value("total", 0) : 1;
            if (idx < 0 || n < 1 || idx >= n) throw MergeError(paths[i] + ": shard: malformed, found " + shown(s));
            if (i == 0) total = n;
            if (n != total)
                throw MergeError(fmt::format("{}: shard: total {} where {} has {}", paths[i], n, paths[0], total));
            if (!shards.emplace(idx, paths[i]).second)
                throw MergeError(fmt::format("{}: shard {}/{} is also {}", paths[i], idx, n, shards[idx]));
        }
        if (static_cast<int>(shards.size()) != total) {
            std::string missing;
            for (int k = 0; k < total; ++k)
                if (!shards.count(k)) missing += (missing.empty() ? "" : ", ") + fmt::format("{}/{}", k, total);
            throw MergeError("missing shard" + std::string(total - shards.size() == 1 ? " " : "s ") + missing +
                             " - the merged report would not be the whole run");
        }
        // No case twice.
        std::map<Key, std::string> seen;
        for (size_t i = 0; i < docs.size(); ++i) {
            std::set<Key> own;  // the same case twice within one run is the run's business (a repeated draw)
            for (const json& c : docs[i]["cases"]) {
                const Key k = key_of(c);
                if (!own.insert(k).second) continue;
                auto [it, fresh] = seen.emplace(k, paths[i]);
                if (!fresh)
                    throw MergeError(fmt::format("{}: case {} on {} is also in {} - overlapping shards", paths[i],
                                                 std::get<3>(k), std::get<0>(k), it->second));
            }
        }
    }

    // ---- the merged document ---------------------------------------------------------------
    json merged = docs[0];
    merged.erase("shard");
    std::vector<std::string> ops = merged.value("ops", std::vector<std::string>{});
    auto op_rank = [&](const json& c) {
        const auto it = std::find(ops.begin(), ops.end(), c.value("op", std::string()));
        return static_cast<int>(it - ops.begin());
    };
    std::vector<json> cases;
    double seconds = 0;
    json from = json::array();
    for (size_t i = 0; i < docs.size(); ++i) {
        seconds += docs[i].value("seconds", 0.0);
        const json s = docs[i].contains("shard") ? docs[i]["shard"] : json();
        from.push_back({{"file", paths[i]},
                        {"shard", s},
                        {"cases", docs[i]["cases"].size()},
                        {"seconds", docs[i].value("seconds", 0.0)}});
        for (json& c : docs[i]["cases"]) cases.push_back(std::move(c));
    }
    // The gate's order: op by op, property cases before fixture cases.
    std::stable_sort(cases.begin(), cases.end(), [&](const json& a, const json& b) {
        const int oa = op_rank(a), ob = op_rank(b);
        if (oa != ob) return oa < ob;
        return (a.value("origin", std::string()) == "fixture") < (b.value("origin", std::string()) == "fixture");
    });
    // Error maps: the gate keeps the first few per (impl, op); so does the merge.
    if (merged.contains("error_maps") && merged["error_maps"].is_object()) {
        const int keep = merged["error_maps"].value("per_impl_op", 0);
        int omitted = 0;
        for (const json& d : docs)
            if (d.contains("error_maps") && d["error_maps"].is_object()) omitted += d["error_maps"].value("omitted", 0);
        std::map<std::pair<std::string, std::string>, int> kept;
        for (json& c : cases)
            if (c.contains("error_map") &&
                ++kept[{c.value("impl", std::string()), c.value("op", std::string())}] > keep) {
                c.erase("error_map");
                c.erase("unshrunk_error_map");
                ++omitted;
            }
        merged["error_maps"]["omitted"] = omitted;
    }
    int passed = 0;
    for (const json& c : cases) passed += c.value("pass", false) ? 1 : 0;
    const int n = static_cast<int>(cases.size());
    merged["cases"] = cases;
    merged["summary"] = {{"cases", n}, {"passed", passed}, {"failed", n - passed}};
    merged["pass"] = passed == n;
    merged["seconds"] = seconds;  // runner time, summed
    merged["merged_from"] = from;
    // Unsupported cases, summed per (impl, op) over the shards.
    json not_run = json::array();
    for (const json& d : docs)
        for (const json& n : d.value("not_run", json::array())) {
            auto same = std::find_if(not_run.begin(), not_run.end(), [&](const json& m) {
                return m.value("impl", "") == n.value("impl", "") && m.value("op", "") == n.value("op", "");
            });
            if (same == not_run.end())
                not_run.push_back(n);
            else
                (*same)["cases"] = same->value("cases", 0) + n.value("cases", 0);
        }
    merged["not_run"] = not_run;
    // Nothing ran, as the merged cases say: a shard's entry stands unless
    // another shard judged such a case; a tampered report directory in any
    // shard fails the merge.
    json nothing_ran = json::array(), tampered = json::array();
    for (const json& d : docs) {
        for (const json& e : d.value("nothing_ran", json::array())) {
            const std::string impl = e.value("impl", ""), op = e.value("op", "");
            const bool ran = std::any_of(cases.begin(), cases.end(), [&](const json& c) {
                return c.value("impl", "") == impl &&
                       (op.empty() || (c.value("op", "") == op && c.value("origin", "") == "property"));
            });
            if (!ran && std::find(nothing_ran.begin(), nothing_ran.end(), e) == nothing_ran.end())
                nothing_ran.push_back(e);
        }
        for (const json& t : d.value("tampered", json::array())) tampered.push_back(t);
    }
    merged["nothing_ran"] = nothing_ran;
    if (tampered.empty())
        merged.erase("tampered");
    else
        merged["tampered"] = tampered;
    merged["pass"] = passed == n && nothing_ran.empty() && tampered.empty();
    return merged;
}

std::string merge_summary(const json& merged) {
    const std::vector<std::string> ops = merged.value("ops", std::vector<std::string>{});
    auto op_rank = [&](const json& c) {
        const auto it = std::find(ops.begin(), ops.end(), c.value("op", std::string()));
        return static_cast<int>(it - ops.begin());
    };
    const json& cases = merged["cases"];
    // op × impl: cases and passes, then each failure's replay.
    std::map<std::pair<int, std::string>, std::pair<int, int>> rows;
    for (const json& c : cases) {
        auto& r = rows[{op_rank(c), c.value("impl", std::string())}];
        ++r.first;
        r.second += c.value("pass", false) ? 1 : 0;
    }
    size_t w = 12, ow = 10;
    for (const auto& [k, r] : rows) w = std::max(w, k.second.size());
    for (const auto& op : ops) ow = std::max(ow, std::string(op).size());
    std::string s = fmt::format("{:<{}} {:<{}} {:>6} {:>6}\n", "op", ow, "impl", w, "cases", "pass");
    for (const auto& [k, r] : rows)
        s += fmt::format("{:<{}} {:<{}} {:>6} {:>6}{}\n", k.first < static_cast<int>(ops.size()) ? ops[k.first] : "?", ow,
                         k.second, w, r.first, r.second, r.first == r.second ? "" : "   FAIL");
    for (const json& c : cases)
        if (!c.value("pass", false))
            s += fmt::format("\nFAIL {} {}  {}\n{}", c.value("impl", std::string()), c.value("op", std::string()),
                             c.value("case_id", std::string()),
                             c.contains("replay") ? "  replay:    " + c["replay"].get<std::string>() + "\n" : "");
    const size_t shards = merged.value("merged_from", json::array()).size();
    const json& sum = merged["summary"];
    s += fmt::format("\nmerged {} report{}: {} cases, {} passed, {} failed\n", shards, shards == 1 ? "" : "s",
                     sum.value("cases", 0), sum.value("passed", 0), sum.value("failed", 0));
    // What else fails the run (nothing ran, a tampered directory), as the gate says it.
    const RunVerdict v = run_verdict(merged, summarise(merged));
    if (!v.pass)
        for (const std::string& why : v.why) s += "FAIL: " + why + "\n";
    return s;
}

}  // namespace conform::report
