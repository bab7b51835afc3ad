// harness/report/twists.h — the twist record (conform/twists.h) as users
// read it: `conform list --twists` (a table), `--json` (what the Python
// package and other tools read instead of a copy of the list) and
// docs/twists.md, generated from the same rows and checked by ctest docs.twists.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace conform::report {

nlohmann::json twists_json();        // {"twists": [{name, kind, flag, id, ops, tensors, bugs, ...}, ...]}
std::string twists_table();          // one line per twist, for the terminal
std::string twists_markdown();       // docs/twists.md, whole

}  // namespace conform::report
