// harness/core/phases.h — where a run's time goes, by phase.
//
// A Scope charges the wall time between its construction and destruction to
// a named phase, exclusive of the scopes opened inside it (a diagnosis that
// reruns the reference is "diagnose", not "reference f64"), so the phases of
// a run add up to its wall time and the largest one is what to fix. One
// thread: the harness drives cases from one thread (implementations may use
// their own threads inside a call, charged to the call).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace conform::phases {

class Scope {
   public:
    explicit Scope(std::string name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
};

struct Phase {
    std::string name;
    double seconds = 0;  // exclusive of nested scopes
    long calls = 0;
};

// The phases since the last take(), in the order first entered; resets them.
std::vector<Phase> take();

}  // namespace conform::phases
