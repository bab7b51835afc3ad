// decode — the block through a KV cache, as a serving engine runs it: the
// first `prefill` tokens in one forward, then every later token alone, each
// appending its rotated key and its value to one cache and attending over all
// of it. It runs block.cpp's forward(); a row's arithmetic never depends on
// the other rows of its chunk, so with increasing positions decode()
// reproduces block() bitwise.
#include <algorithm>

#include "scalar/forward.h"

namespace conform::scalar {

void ScalarImpl::decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                        MutView out) {
    check_block_inputs("decode", x, pos, w, c);
    const int64_t T = x.rows;
    detail::expect(prefill >= 0 && prefill <= T, "decode",
                   "prefill must be in [0, " + std::to_string(T) + "], found " + std::to_string(prefill));
    detail::expect_shape("decode", "out", out, T, c.d_model);

    // Every step rotates with the RoPE of the whole call (dynamic NTK's base
    // for max(pos) + 1 tokens, over the positions it rotates at), as block()
    // over the same tokens does.
    call_len_ = 0;
    for (int64_t t = 0; t < T; t++)
        call_len_ = std::max(call_len_, (t < prefill ? pos[t] : decode_position(pos[t])) + 1);
    struct Reset {
        int64_t& len;
        ~Reset() { len = 0; }
    } reset{call_len_};

    const Tensor wqkv = packed_qkv(w, c);          // (D, (H + 2*KV) * hd)
    RunState s(c, std::max<int64_t>(prefill, 1));  // the largest chunk: the prefill, or one token
    KvCache cache(c, T);                           // (T, KV * hd) each, filled as we go

    // prefill: the first `prefill` tokens in one forward
    if (prefill > 0) {
        forward(View{x.row(0), prefill, x.cols}, Positions{pos.data, prefill}, w, wqkv.view(), c, false, cache, s);
        copy_rows(s.out, prefill, out, 0);
    }
    // decode: every later token alone, attending over the cache [0, t]
    for (int64_t t = prefill; t < T; t++) {
        const int64_t step_pos = decode_position(pos[t]);
        forward(View{x.row(t), 1, x.cols}, Positions{&step_pos, 1}, w, wqkv.view(), c, true, cache, s);
        copy_rows(s.out, 1, out, t);
    }
}

void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c, MutView out) {
    ScalarImpl().decode(x, w, pos, prefill, c, out);
}

}  // namespace conform::scalar
