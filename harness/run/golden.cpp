#include "run/golden.h"

#include <cctype>
#include <filesystem>

#include "h5/fixture.h"
#include "reference/reference.h"

namespace conform::h5 {

NamedD golden_expected(const Case& c) {
    NamedD all = ref::run(c, ref::Options{});
    NamedD out;
    for (const auto& name : output_names(c.op)) {
        auto it = all.find(name);
        if (it != all.end()) out[name] = std::move(it->second);
    }
    return out;
}

std::string failure_file_name(const std::string& case_id, const std::string& impl) {
    auto safe = [](const std::string& s) {
        std::string o;
        for (char ch : s) {
            const bool keep = std::isalnum(static_cast<unsigned char>(ch)) || ch == '=' || ch == '.' || ch == '+' ||
                              ch == '-' || ch == '_';
            o += keep ? ch : '_';
        }
        while (!o.empty() && o.back() == '_') o.pop_back();
        return o;
    };
    return safe(case_id) + "." + safe(impl) + ".h5";
}

std::string save_failure(const std::string& dir, const Case& c, const FailureInfo& info, bool force) {
    FixtureCase fc;
    fc.c = c;
    fc.c.group = kFailureGroup;
    fc.c.file.clear();
    fc.c.expected = golden_expected(c);
    fc.c.description = "shrunk failure of " + info.impl + " on " + to_string(c.op) + " [" + to_string(info.dtype) + "]" +
                       (info.first_failing.empty() ? "" : ", first failing tensor " + info.first_failing);
    fc.attrs["producer"] = std::string("conform --save-failures (expected: LibTorch ") + ref::version() + " reference, float64)";
    fc.attrs["impl"] = info.impl;
    fc.attrs["dtype"] = std::string(to_string(info.dtype));
    fc.attrs["seed"] = static_cast<int64_t>(info.run_seed);
    fc.attrs["case_seed"] = static_cast<int64_t>(c.seed);
    fc.attrs["case_id"] = c.id;
    fc.attrs["shrink_steps"] = static_cast<int64_t>(info.shrink_steps);
    if (!info.error.empty()) fc.attrs["impl_error"] = info.error;
    const std::string path = (std::filesystem::path(dir) / failure_file_name(c.id, info.impl)).string();
    write_fixture(path, {fc}, force);
    return path;
}

std::string fixture_replay_command(const std::string& impl, const std::string& file, const std::string& group,
                                   DType dtype) {
    auto quote = [](const std::string& s) {
        std::string q = "'";
        for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
        return q + "'";
    };
    std::string cmd = "build/conform --impl " + impl + " --fixtures " + quote(file) + " --fixture-case " + quote(group) +
                      " --cases 0";
    if (dtype != DType::f32) cmd += std::string(" --dtype ") + to_string(dtype);
    return cmd;
}

}  // namespace conform::h5
