// harness/judge/error_map.h — where in a failing tensor the error sits, small
// enough to keep in a report.
//
// |impl − ref| over token × (head, dim), max-pooled to a bounded grid, with
// the profiles that tell the common bugs apart at a glance: a swapped RoPE
// layout errs at every pair and position, a wrong theta at the low-frequency
// dims and more with position, a tiled GQA mapping on whole heads. The HTML
// report draws it (harness/report/html.cpp); it travels in the JSON report
// (reports/README.md, "error_map"), so a merged report can still draw it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/case.h"

namespace conform {

struct ErrorMap {
    // Caps: the grid holds at most kMaxRows × kMaxCols cells and each
    // profile at most kMaxProfile points; larger tensors are max-pooled, so
    // no error is hidden, only merged with its neighbours.
    static constexpr int64_t kMaxRows = 64;
    static constexpr int64_t kMaxCols = 256;
    static constexpr int64_t kMaxProfile = 256;

    std::string tensor;   // which output or tap, e.g. "q_rot"
    std::string case_id;  // the case it was measured on
    int64_t rows = 0;     // the tensor's tokens
    int64_t cols = 0;     // its columns: heads × head_dim
    int64_t heads = 1;    // 1 when the tensor has no heads (then head_dim == cols)
    int64_t head_dim = 0;
    bool has_heads = false;  // columns are (head, dim), not plain features
    double allowed = 0;      // the tensor's bound (max_abs allowed)
    double max_err = 0;      // the largest finite error (NaN when every value is non-finite)

    // The grid: grid_rows × grid_cols, row-major. Grid row i covers tokens
    // [i·row_pool, (i+1)·row_pool); grid column j covers head group
    // j / dim_cells (head_pool heads each) and dim group j % dim_cells
    // (dim_pool dims each). A cell is the max |impl − ref| over what it
    // covers; NaN when any value it covers is NaN or ±Inf in the output.
    int64_t row_pool = 1, head_pool = 1, dim_pool = 1;
    int64_t grid_rows = 0, grid_cols = 0, dim_cells = 0;
    std::vector<double> grid;
    std::vector<int64_t> row_positions;  // position of each grid row's first token

    // Profiles (NaN entries as in the grid):
    std::vector<double> by_position;             // max over columns, per token group of position_pool tokens
    std::vector<int64_t> by_position_positions;  // position of each group's first token
    int64_t position_pool = 1;
    std::vector<double> by_dim;  // max over tokens and heads, per dim group of by_dim_pool dims
    int64_t by_dim_pool = 1;
    std::vector<double> by_head;  // max over tokens and dims, per head (empty without heads)

    bool empty() const { return tensor.empty(); }
};

// The map of |observed − ref| for one tensor (row-major [rows, cols]).
// head_dim 0: the tensor has no heads. positions: the RoPE position of each
// row, or empty (row index). observed may hold NaN / ±Inf.
ErrorMap error_map(const std::string& tensor, const double* observed, const DTensor& ref, int64_t head_dim,
                   const std::vector<int64_t>& positions, double allowed);

// The positions of a case's output rows: the op's per-row position input
// ("positions" or "q_positions") when it has one row per output row, else empty.
const std::vector<int64_t>& row_positions_of(const Case& c, int64_t rows);

}  // namespace conform
