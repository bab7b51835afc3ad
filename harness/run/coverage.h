// harness/run/coverage.h — conform coverage: which trap dimensions
// (select.h: layouts, theta, positions, qk_norm, GQA shapes, widths, RoPE
// scaling, partial rotary) a run reaches, per op and implementation — from
// the cases the gate would run with the same flags (the same plan: draws,
// --params, shard and fixture files), with nothing executed. An
// implementation counts a case only where it supports() it, as in the gate.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/plan.h"

namespace conform::run {

// One (op, implementation): its cases, and counts[dimension][class], how
// many of them reach the class.
struct CoverageCell {
    Op op;
    std::string impl;
    int cases = 0;
    std::vector<std::vector<int>> counts;
};

// A class of a dimension that applies to the op and no case reached.
struct EmptyCell {
    Op op;
    std::string impl, dimension, cls;
};

struct Coverage {
    std::vector<CoverageCell> cells;  // op-major: one per implementation that implements the op, in order
    int property = 0;                 // property cases in this shard
    std::vector<EmptyCell> empty;
};

// Every planned case (property cases materialised, fixture cases as read)
// classed, per op and implementation.
Coverage count_coverage(const Plan& plan, const ImplSet& impls);

// conform-coverage/1.
nlohmann::json coverage_json(const Plan& plan, const Coverage& c);
// The header line, one table per op (implementations that reach the same
// cells share it), and the empty cells.
std::string coverage_table(const Plan& plan, const Coverage& c);

}  // namespace conform::run
