#include "core/phases.h"

#include <chrono>

namespace conform::phases {

namespace {

using Clock = std::chrono::steady_clock;

struct Open {
    size_t phase;
    Clock::time_point since;  // when it last became the innermost scope
};

struct State {
    std::vector<Phase> phases;
    std::vector<Open> stack;
};

State& state() {
    static State s;
    return s;
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

Scope::Scope(std::string name) {
    State& s = state();
    const auto now = Clock::now();
    if (!s.stack.empty()) s.phases[s.stack.back().phase].seconds += seconds(s.stack.back().since, now);
    size_t i = 0;
    while (i < s.phases.size() && s.phases[i].name != name) ++i;
    if (i == s.phases.size()) s.phases.push_back({std::move(name), 0, 0});
    ++s.phases[i].calls;
    s.stack.push_back({i, now});
}

Scope::~Scope() {
    State& s = state();
    const auto now = Clock::now();
    s.phases[s.stack.back().phase].seconds += seconds(s.stack.back().since, now);
    s.stack.pop_back();
    if (!s.stack.empty()) s.stack.back().since = now;
}

std::vector<Phase> take() {
    State& s = state();
    const auto now = Clock::now();
    // Charge the innermost open scope up to now, and keep it open.
    if (!s.stack.empty()) {
        s.phases[s.stack.back().phase].seconds += seconds(s.stack.back().since, now);
        s.stack.back().since = now;
    }
    std::vector<Phase> out = s.phases;
    // Open scopes keep their slots (their indices are on the stack); the rest go.
    for (Phase& p : s.phases) p.seconds = 0, p.calls = 0;
    if (s.stack.empty()) s.phases.clear();
    std::vector<Phase> nonzero;
    for (auto& p : out)
        if (p.calls > 0 || p.seconds > 0) nonzero.push_back(std::move(p));
    return nonzero;
}

}  // namespace conform::phases
