// harness/report/svg.h — the HTML report's pictures, as inline SVG (no
// scripts, no fonts or images fetched): the error map and the error profiles
// of a failing tensor, from its "error_map" in the JSON report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace conform::report::svg {

// The colour of an error, on a log scale relative to the bound: at or below
// the bound pale blue-grey (calm: a conforming tensor looks quiet), above it
// yellow → red → near-black over hot_decades decades; exactly 0 white; NaN
// (the output was NaN or ±Inf) magenta.
std::string colour(double err, double allowed, double hot_decades = 8);

// The decades above the bound a map's colours span: up to its largest error
// (at least 1), so the pattern inside a failing tensor keeps its contrast.
double hot_decades(const nlohmann::json& error_map);

// The colour scale, as a small SVG strip with its labels.
std::string legend(double hot_decades);

// |impl − ref| over token × (head, dim): position down, heads left to right,
// each head's dims 0..head_dim-1 inside it, head boundaries drawn.
std::string heatmap(const nlohmann::json& error_map);

// An error profile on a log axis, with the bound as a dashed line. NaN
// values are marked at the top; zeros sit on the bottom edge.
struct Plot {
    std::string title, xlabel;
    std::vector<double> x, y;
    double allowed = 0;
    bool bars = false;       // categorical x (heads): one bar each
    double hot_decades = 8;  // the colour scale of its markers (colour())
};
std::string line_plot(const Plot& p);

}  // namespace conform::report::svg
