// conform merge-reports: joins the JSON reports of a sharded run (--shard i/n,
// or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS, one per CI runner) into the report
// the unsharded run would have written, and renders it like the gate does.
//
// The shards must be one run: the same schema, seed, cases per op, dtype,
// implementations, ops, --params, fixture files and model config, every
// shard of the same total exactly once, and no case in two of them. Anything else is exit 2,
// naming the file and the field. The exit code is then the merged run's
// verdict: 0 every case conforms, 1 a nonconformance.
#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "cli/commands.h"
#include "cli/commands.h"
#include "run/plan.h"
#include "report/formats.h"
#include "report/report.h"

namespace conform::cli {

namespace {

using nlohmann::json;

struct Opts {
    std::vector<std::string> inputs;
    std::string out = "reports";
    std::string formats = "json";
    bool quiet = false;
};

struct BadInput : std::runtime_error {
    using std::runtime_error::runtime_error;
};

json read_report(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw BadInput(path + ": cannot be read");
    json j;
    try {
        f >> j;
    } catch (const json::exception& e) {
        throw BadInput(path + ": not JSON: " + e.what());
    }
    if (!j.is_object()) throw BadInput(path + ": expected a JSON object (a conform report)");
    const std::string schema = j.value("schema", std::string("(none)"));
    if (schema != "conform-report/1") throw BadInput(path + ": schema: expected conform-report/1, found " + schema);
    if (!j.contains("cases") || !j["cases"].is_array()) throw BadInput(path + ": cases: missing or not an array");
    return j;
}

std::string shown(const json& v) {
    return v.is_null() ? "(absent)" : v.dump();
}

// A case's identity across shards: one implementation on one case.
using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>;
Key key_of(const json& c) {
    auto s = [&](const char* k) { return c.contains(k) && c[k].is_string() ? c[k].get<std::string>() : std::string(); };
    // A shrunk case by the case it was drawn as: two shards' failures may shrink to one id.
    const std::string id = c.contains("shrunk_from") ? s("shrunk_from") : s("case_id");
    return {s("impl"), s("op"), s("origin"), id, s("file"), s("group")};
}

int run(const Opts& o) {
    namespace fs = std::filesystem;
    std::string why;
    const auto formats = parse_report_formats(o.formats, &why);
    if (!formats) {
        std::cerr << "conform: merge-reports: --report: " << why << "\n";
        return kUsage;
    }
    if (const std::string p = out_dir_problem(o.out); !p.empty()) {
        std::cerr << "conform: merge-reports: --out " << p << "\n";
        return kUsage;
    }
    // Never write over what is being merged.
    for (const auto& f : *formats) {
        const std::string target = report_path(o.out, f);
        for (const auto& in : o.inputs) {
            std::error_code ec;
            if (fs::exists(target, ec) && fs::equivalent(target, in, ec)) {
                std::cerr << "conform: merge-reports: " << target << " is one of the inputs; choose another --out\n";
                return kUsage;
            }
        }
    }

    std::vector<json> docs;
    try {
        for (const auto& in : o.inputs)
            docs.push_back(read_report(in));
        // One run: what selects and judges the cases must agree.
        const json& first = docs[0];
        for (size_t i = 1; i < docs.size(); ++i)
            for (const std::string& field : run::run_identity_fields()) {
                const json a = first.contains(field) ? first[field] : json(),
                           b = docs[i].contains(field) ? docs[i][field] : json();
                if (a != b)
                    throw BadInput(fmt::format("{}: {}: expected {} (as in {}), found {} - not shards of one run",
                                               o.inputs[i], field, shown(a), o.inputs[0], shown(b)));
            }
        // Every shard of one total, once each: a lost runner must not pass as a smaller run.
        std::map<int, std::string> shards;
        int total = 0;
        for (size_t i = 0; i < docs.size(); ++i) {
            const json& s = docs[i].contains("shard") ? docs[i]["shard"] : json();
            const int idx = s.is_object() ? s.value("index", -1) : 0, n = s.is_object() ? s.value("total", 0) : 1;
            if (idx < 0 || n < 1 || idx >= n) throw BadInput(o.inputs[i] + ": shard: malformed, found " + shown(s));
            if (i == 0) total = n;
            if (n != total)
                throw BadInput(fmt::format("{}: shard: total {} where {} has {}", o.inputs[i], n, o.inputs[0], total));
            if (!shards.emplace(idx, o.inputs[i]).second)
                throw BadInput(fmt::format("{}: shard {}/{} is also {}", o.inputs[i], idx, n, shards[idx]));
        }
        if (static_cast<int>(shards.size()) != total) {
            std::string missing;
            for (int k = 0; k < total; ++k)
                if (!shards.count(k)) missing += (missing.empty() ? "" : ", ") + fmt::format("{}/{}", k, total);
            throw BadInput("missing shard" + std::string(total - shards.size() == 1 ? " " : "s ") + missing +
                           " - the merged report would not be the whole run");
        }
        // No case twice.
        std::map<Key, std::string> seen;
        for (size_t i = 0; i < docs.size(); ++i) {
            std::set<Key> own;  // the same case twice within one run is the run's business (a repeated draw)
            for (const json& c : docs[i]["cases"]) {
                const Key k = key_of(c);
                if (!own.insert(k).second) continue;
                auto [it, fresh] = seen.emplace(k, o.inputs[i]);
                if (!fresh)
                    throw BadInput(fmt::format("{}: case {} on {} is also in {} - overlapping shards", o.inputs[i],
                                               std::get<3>(k), std::get<0>(k), it->second));
            }
        }
    } catch (const BadInput& e) {
        std::cerr << "conform: merge-reports: " << e.what() << "\n";
        return kUsage;
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
        from.push_back({{"file", o.inputs[i]},
                        {"shard", s},
                        {"cases", docs[i]["cases"].size()},
                        {"seconds", docs[i].value("seconds", 0.0)}});
        for (json& c : docs[i]["cases"])
            cases.push_back(std::move(c));
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
    for (const json& c : cases)
        passed += c.value("pass", false) ? 1 : 0;
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
            if (!ran && std::find(nothing_ran.begin(), nothing_ran.end(), e) == nothing_ran.end()) nothing_ran.push_back(e);
        }
        for (const json& t : d.value("tampered", json::array())) tampered.push_back(t);
    }
    merged["nothing_ran"] = nothing_ran;
    if (tampered.empty())
        merged.erase("tampered");
    else
        merged["tampered"] = tampered;
    merged["pass"] = passed == n && nothing_ran.empty() && tampered.empty();

    std::vector<std::string> written;
    try {
        written = write_reports(merged, *formats, o.out);
    } catch (const std::exception& e) {
        std::cerr << "conform: merge-reports: cannot write report: " << e.what() << "\n";
        return kUsage;
    }

    if (!o.quiet) {
        // op × impl: cases and passes, then each failure's replay.
        std::map<std::pair<int, std::string>, std::pair<int, int>> rows;
        for (const json& c : cases) {
            auto& r = rows[{op_rank(c), c.value("impl", std::string())}];
            ++r.first;
            r.second += c.value("pass", false) ? 1 : 0;
        }
        size_t w = 12;
        for (const auto& [k, r] : rows)
            w = std::max(w, k.second.size());
        std::cout << fmt::format("{:<10} {:<{}} {:>6} {:>6}\n", "op", "impl", w, "cases", "pass");
        for (const auto& [k, r] : rows)
            std::cout << fmt::format("{:<10} {:<{}} {:>6} {:>6}{}\n",
                                     k.first < static_cast<int>(ops.size()) ? ops[k.first] : "?", k.second, w, r.first,
                                     r.second, r.first == r.second ? "" : "   FAIL");
        for (const json& c : cases)
            if (!c.value("pass", false))
                std::cout << fmt::format(
                    "\nFAIL {} {}  {}\n{}", c.value("impl", std::string()), c.value("op", std::string()),
                    c.value("case_id", std::string()),
                    c.contains("replay") ? "  replay:    " + c["replay"].get<std::string>() + "\n" : "");
        std::cout << fmt::format("\nmerged {} report{}: {} cases, {} passed, {} failed\n", docs.size(),
                                 docs.size() == 1 ? "" : "s", n, passed, n - passed);
        for (const auto& w : written)
            std::cout << "report: " << w << "\n";
    }
    return passed == n ? kConform : kNonconformance;
}

}  // namespace

Command add_merge_reports(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    CLI::App* sub =
        app.add_subcommand("merge-reports",
                           "join the JSON reports of a sharded run (--shard i/n) into one report; exit 0 if every case "
                           "conforms, 1 if not, 2 if the reports are not the shards of one run");
    sub->add_option("reports", o->inputs, "the shards' conform.json files")->required()->check(CLI::ExistingFile);
    sub->add_option("--out", o->out, "directory for the merged report (default reports/); never one of the inputs");
    sub->add_option("--report", o->formats, "formats to write: json,junit,md,html or all (default json)");
    sub->add_flag("--quiet", o->quiet, "print nothing but errors");
    return {sub, [o] { return run(*o); }};
}

}  // namespace conform::cli
