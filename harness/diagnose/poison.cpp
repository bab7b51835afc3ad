// What a paged kernel read that it must not have: the rows of a paged cache
// that no sequence owns hold a NaN whose payload is the row (gen::poison), and
// NaN payloads survive float32 arithmetic, so a NaN in the output names the
// row it came from. Which row, relative to the sequence the output row
// belongs to, names the bug — no reference run needed. (Below float32 the
// payload is rounded away; the hypotheses then do what they can.)
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "diagnose/diagnose.h"

namespace conform::diagnose {

namespace {

// The sequence whose queries include row t.
int64_t sequence_of(const std::vector<int64_t>& qo, int64_t t) {
    return static_cast<int64_t>(std::upper_bound(qo.begin(), qo.end(), t) - qo.begin()) - 1;
}

}  // namespace

std::optional<HypothesisMatch> poison_trace(const Case& c, const NamedD& observed) {
    if (!op_info(c.op).uses(kPaged)) return std::nullopt;
    const auto& qo = c.pos("qo_indptr");
    const auto& kvp = c.pos("kv_indptr");
    const auto& ids = c.pos("kv_indices");
    const auto& last = c.pos("kv_last_page_len");
    const int64_t P = c.config.page_size, pages = c.in(op_info(c.op).pools().at(0)).rows() / P;
    for (const auto& [name, t] : observed) {
        for (int64_t i = 0; i < t.numel(); ++i) {
            const auto row = gen::poison_row(static_cast<float>(t.data[static_cast<size_t>(i)]));
            if (!row) continue;
            const int64_t token = i / t.cols(), b = sequence_of(qo, token), page = *row / P, off = *row % P;
            const int64_t first = kvp[static_cast<size_t>(b)], n = kvp[static_cast<size_t>(b) + 1] - first;
            HypothesisMatch m;
            m.tensor = name;
            m.err_config = INFINITY;  // NaN under the config; the read explains it exactly
            m.err_hypothesis = 0;
            m.change = fmt::format("read cache row {} (page {}, slot {})", *row, page, off);
            const std::string where = fmt::format("{} row {} (sequence {}) carries the poison of cache row {} (page {}, slot {})",
                                                  name, token, b, *row, page, off);
            auto own_index = [&](int64_t seq) -> int64_t {
                for (int64_t k = kvp[static_cast<size_t>(seq)]; k < kvp[static_cast<size_t>(seq) + 1]; ++k)
                    if (ids[static_cast<size_t>(k)] == page) return k - kvp[static_cast<size_t>(seq)];
                return -1;
            };
            const int64_t k = own_index(b);
            if (k == n - 1 && off >= last[static_cast<size_t>(b)]) {
                m.id = "paged_last_page_len_ignored";
                m.why = fmt::format("{}: past its last page's {} used slots. The last page's length (kv_last_page_len) "
                                    "was not honoured: a sequence has (n - 1) * page_size + last_page_len keys",
                                    where, last[static_cast<size_t>(b)]);
            } else if (n > 0 && (page - ids[static_cast<size_t>(first)] + pages) % pages < n) {
                m.id = "paged_block_table_ignored";
                m.why = fmt::format("{}: page {} is its first page {} + {} (around a pool of {}), which the block "
                                    "table does not give it. Its pages are kv_indices[kv_indptr[b] + i], not consecutive",
                                    where, page, ids[static_cast<size_t>(first)],
                                    (page - ids[static_cast<size_t>(first)] + pages) % pages, pages);
            } else {
                int64_t owner = -1;
                for (int64_t s = 0; s + 1 < static_cast<int64_t>(kvp.size()) && owner < 0; ++s)
                    if (s != b && own_index(s) >= 0) owner = s;
                m.id = owner >= 0 ? "paged_read_other_sequence" : "paged_read_unowned_row";
                m.why = owner >= 0 ? fmt::format("{}: a slot of sequence {}'s pages that it does not use", where, owner)
                                   : fmt::format("{}: a page no sequence of the batch owns", where);
            }
            m.note = "traced from the NaN's payload (conform poisons each unowned cache row with its own index)";
            return m;
        }
    }
    return std::nullopt;
}

std::optional<HypothesisMatch> name_contract_error(const Case& c, const std::string& error) {
    if (!op_info(c.op).uses(kPaged)) return std::nullopt;
    // judge.cpp's "left element N of output 'out' [T,C] unwritten"
    const auto at = error.find("left element ");
    if (at == std::string::npos || error.find("unwritten") == std::string::npos) return std::nullopt;
    const int64_t element = std::stoll(error.substr(at + 13));
    const bool lse = error.find("output 'lse'") != std::string::npos;
    const int64_t cols = lse ? c.config.n_heads : c.config.q_width(), token = element / cols;
    const auto& qo = c.pos("qo_indptr");
    const auto& kvp = c.pos("kv_indptr");
    const auto& last = c.pos("kv_last_page_len");
    const int64_t b = sequence_of(qo, token), n = kvp[static_cast<size_t>(b) + 1] - kvp[static_cast<size_t>(b)];
    const int64_t kv_len = n == 0 ? 0 : (n - 1) * c.config.page_size + last[static_cast<size_t>(b)];
    const int64_t q_len = qo[static_cast<size_t>(b) + 1] - qo[static_cast<size_t>(b)];
    const int64_t pos = kv_len - q_len + (token - qo[static_cast<size_t>(b)]);
    if (pos >= 0) return std::nullopt;  // the row sees keys: not this bug
    HypothesisMatch m;
    m.id = "paged_empty_unwritten";
    m.tensor = lse ? "lse" : "out";
    m.why = fmt::format("row {} (sequence {}, {} keys, {} queries) sees no key and was left unwritten: such a row must "
                        "get out = 0 and lse = -inf",
                        token, b, kv_len, q_len);
    return m;
}

}  // namespace conform::diagnose
