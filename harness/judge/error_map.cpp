#include "judge/error_map.h"

#include <algorithm>
#include <cmath>

namespace conform {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

// Max-pooling that keeps non-finite values visible: once a NaN (an output
// that was NaN or ±Inf) is in the pool, the pool is NaN.
void pool_into(double& cell, double e) {
    if (std::isnan(cell)) return;
    if (std::isnan(e)) {
        cell = e;
        return;
    }
    cell = std::max(cell, e);
}

}  // namespace

const std::vector<int64_t>& row_positions_of(const Case& c, int64_t rows) {
    static const std::vector<int64_t> none;
    for (const char* name : {"positions", "q_positions"}) {
        auto it = c.positions.find(name);
        if (it != c.positions.end() && static_cast<int64_t>(it->second.size()) == rows) return it->second;
    }
    return none;
}

ErrorMap error_map(const std::string& tensor, const double* observed, const DTensor& ref, int64_t head_dim,
                   const std::vector<int64_t>& positions, double allowed) {
    ErrorMap m;
    m.tensor = tensor;
    m.rows = ref.rows();
    m.cols = ref.cols();
    m.allowed = allowed;
    m.has_heads = head_dim > 0 && m.cols % head_dim == 0;
    m.head_dim = m.has_heads ? head_dim : m.cols;
    m.heads = m.has_heads ? m.cols / head_dim : 1;
    if (m.rows <= 0 || m.cols <= 0) return m;
    const bool have_pos = static_cast<int64_t>(positions.size()) == m.rows;
    auto position = [&](int64_t row) { return have_pos ? positions[static_cast<size_t>(row)] : row; };

    // Columns: keep head boundaries (a whole-head pattern must stay whole),
    // pool dims inside a head first, heads only when there are more than cells.
    m.row_pool = ceil_div(m.rows, ErrorMap::kMaxRows);
    if (m.heads <= ErrorMap::kMaxCols) {
        m.head_pool = 1;
        m.dim_pool = ceil_div(m.head_dim, std::max<int64_t>(1, ErrorMap::kMaxCols / m.heads));
    } else {
        m.head_pool = ceil_div(m.heads, ErrorMap::kMaxCols);
        m.dim_pool = m.head_dim;
    }
    m.dim_cells = ceil_div(m.head_dim, m.dim_pool);
    m.grid_rows = ceil_div(m.rows, m.row_pool);
    m.grid_cols = ceil_div(m.heads, m.head_pool) * m.dim_cells;
    m.grid.assign(static_cast<size_t>(m.grid_rows * m.grid_cols), 0.0);
    for (int64_t i = 0; i < m.grid_rows; ++i) m.row_positions.push_back(position(i * m.row_pool));

    m.position_pool = ceil_div(m.rows, ErrorMap::kMaxProfile);
    m.by_position.assign(static_cast<size_t>(ceil_div(m.rows, m.position_pool)), 0.0);
    for (int64_t i = 0; i < static_cast<int64_t>(m.by_position.size()); ++i)
        m.by_position_positions.push_back(position(i * m.position_pool));
    m.by_dim_pool = ceil_div(m.head_dim, ErrorMap::kMaxProfile);
    m.by_dim.assign(static_cast<size_t>(ceil_div(m.head_dim, m.by_dim_pool)), 0.0);
    if (m.has_heads) m.by_head.assign(static_cast<size_t>(m.heads), 0.0);

    m.max_err = NAN;
    for (int64_t r = 0; r < m.rows; ++r) {
        for (int64_t col = 0; col < m.cols; ++col) {
            const size_t k = static_cast<size_t>(r * m.cols + col);
            const double a = observed[k];
            const double e = std::isfinite(a) ? std::fabs(a - ref.data[k]) : NAN;
            const int64_t head = col / m.head_dim, dim = col % m.head_dim;
            const int64_t gc = (head / m.head_pool) * m.dim_cells + dim / m.dim_pool;
            pool_into(m.grid[static_cast<size_t>((r / m.row_pool) * m.grid_cols + gc)], e);
            pool_into(m.by_position[static_cast<size_t>(r / m.position_pool)], e);
            pool_into(m.by_dim[static_cast<size_t>(dim / m.by_dim_pool)], e);
            if (m.has_heads) pool_into(m.by_head[static_cast<size_t>(head)], e);
            if (!std::isnan(e) && !(e <= m.max_err)) m.max_err = e;
        }
    }
    return m;
}

}  // namespace conform
