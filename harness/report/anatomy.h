// harness/report/anatomy.h — conform anatomy's outputs for a terminal and
// for a program: the table (op by op, decode against prefill, the layer and
// the model, parameters, the KV cache, intensity as T grows) and
// conform-anatomy/1, both from config/anatomy.h's counts. The page is
// anatomy_html.h; all three take the same AnatomyPage.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/anatomy_html.h"

namespace conform::report {

// This machine's ceilings (reference/ceilings.h, as bench measures them, every
// core) as the ridge point.
Ridge measure_ridge();

// conform-anatomy/1; "ceilings" when the ridge is measured.
nlohmann::json anatomy_json(const AnatomyPage& a);

// The table and the lines after it; the ridge point's line when measured.
std::string anatomy_table(const AnatomyPage& a);

}  // namespace conform::report
