#!/usr/bin/python3
"""numpy_worker's maths where the golden files do not reach: linear and
dynamic RoPE scaling, yarn's attention factor, partial rotary, GQA's head
mapping, causality by position, QK-norm's place, decode against block.

    /usr/bin/python3 tests/workers/test_numpy_ops.py [-v]

Relations HF's formulas imply (as tests/test_rope_scaling.cpp checks them
for the C++ implementations), not values copied from the worker.
"""

import sys
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "impls" / "worker_example"))
import numpy_worker as nw  # noqa: E402

NONE = {"type": "none", "factor": 1.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position": 0,
        "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}


def cfg(**over):
    c = {"d_model": 16, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "ffn_dim": 24, "rope_layout": "neox",
         "rope_theta": 10000.0, "rotary_dim": 8, "qk_norm": False, "norm_eps": 1e-5, "rope_scaling": dict(NONE)}
    c.update(over)
    return c


def scaling(**over):
    s = dict(NONE)
    s.update(over)
    return s


class Rope(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)

    def test_dynamic_inside_the_context_is_unscaled_bitwise(self):
        pos = np.array([0, 3, 9, 18, 19])
        for orig in (20, 21, 70):  # L = 20 <= orig
            c = cfg(rope_scaling=scaling(type="dynamic", factor=4.0, original_max_position=orig))
            np.testing.assert_array_equal(nw.rope(self.x, pos, config=c), nw.rope(self.x, pos, config=cfg()))

    def test_dynamic_beyond_the_context_is_the_ntk_base(self):
        pos = np.array([0, 3, 9, 18, 19])  # L = 20
        f, orig, rd = 4.0, 16, 8
        c = cfg(rope_scaling=scaling(type="dynamic", factor=f, original_max_position=orig))
        theta = 10000.0 * (f * 20 / orig - (f - 1)) ** (rd / (rd - 2))
        np.testing.assert_allclose(nw.rope(self.x, pos, config=c), nw.rope(self.x, pos, config=cfg(rope_theta=theta)),
                                   rtol=0, atol=1e-6)
        self.assertFalse(np.allclose(nw.rope(self.x, pos, config=c), nw.rope(self.x, pos, config=cfg()), atol=1e-3))

    def test_linear_by_f_at_f_times_q_is_unscaled_at_q(self):
        q = np.array([0, 1, 7, 300, 4099])
        for layout in ("neox", "interleaved"):
            c = cfg(rope_layout=layout, rope_scaling=scaling(type="linear", factor=4.0))
            np.testing.assert_array_equal(nw.rope(self.x, 4 * q, config=c),
                                          nw.rope(self.x, q, config=cfg(rope_layout=layout)))

    def test_yarn_multiplies_cos_and_sin_by_the_attention_factor(self):
        c = cfg(rotary_dim=4, rope_scaling=scaling(type="yarn", factor=4.0, original_max_position=64,
                                                   attention_factor=1.25))
        out = nw.rope(self.x, np.zeros(5, np.int64), config=c).reshape(5, 2, 8)
        xh = self.x.reshape(5, 2, 8)
        np.testing.assert_allclose(out[..., :4], 1.25 * xh[..., :4], rtol=1e-6)  # position 0: cos = 1.25, sin = 0
        np.testing.assert_array_equal(out[..., 4:], xh[..., 4:])  # past rotary_dim: untouched

    def test_partial_rotary_pairs_inside_the_rotary_dims(self):
        pos = np.array([1, 2, 3, 4, 5])
        c = cfg(rotary_dim=4)
        out = nw.rope(self.x, pos, config=c).reshape(5, 2, 8)
        xh = self.x.reshape(5, 2, 8)
        np.testing.assert_array_equal(out[..., 4:], xh[..., 4:])
        # neox pairs (i, i + 2) inside the 4 rotary dims keep their length
        np.testing.assert_allclose(np.hypot(out[..., 0:2], out[..., 2:4]), np.hypot(xh[..., 0:2], xh[..., 2:4]), rtol=1e-5)
        # and a 4-dim head rotated whole is the same rotation
        full = nw.rope(np.ascontiguousarray(xh[..., :4]).reshape(5, 8), pos, config=cfg(head_dim=4, rotary_dim=4))
        np.testing.assert_array_equal(out[..., :4], full.reshape(5, 2, 4))


class Attention(unittest.TestCase):
    def test_query_head_h_reads_kv_head_h_over_the_group(self):
        c = cfg(n_heads=4, n_kv_heads=2, head_dim=2)
        q = np.zeros((1, 8), np.float32)
        k = np.zeros((1, 4), np.float32)
        v = np.array([[1, 1, 2, 2]], np.float32)  # kv head 0: ones, kv head 1: twos
        out = nw.attention(q, k, v, np.array([0]), np.array([0]), config=c)
        np.testing.assert_array_equal(out.reshape(4, 2)[:, 0], [1, 1, 2, 2])  # repeat, not tile ([1, 2, 1, 2])

    def test_causal_by_position_not_by_row_and_blind_queries_get_zeros(self):
        c = cfg(n_heads=1, n_kv_heads=1, head_dim=2)
        rng = np.random.default_rng(2)
        q = rng.standard_normal((3, 2)).astype(np.float32)
        k = rng.standard_normal((3, 2)).astype(np.float32)
        v = np.array([[1, 0], [0, 1], [5, 5]], np.float32)
        out = nw.attention(q, k, v, np.array([7, 2, 0]), np.array([5, 1, 3]), config=c)
        np.testing.assert_array_equal(out[2], [0, 0])  # position 0 sees no key
        np.testing.assert_array_equal(out[1], [0, 1])  # position 2 sees only the key at 1
        self.assertTrue(np.all(np.isfinite(out)))


class Block(unittest.TestCase):
    def weights(self, c, T, seed=3):
        rng = np.random.default_rng(seed)
        r = lambda *s: (rng.standard_normal(s) * 0.4).astype(np.float32)  # noqa: E731
        D, Q, KVW, F, hd = c["d_model"], c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"], c["ffn_dim"], c["head_dim"]
        return dict(x=r(T, D), positions=np.arange(T, dtype=np.int64) * 5 + 2, attn_norm=1 + r(D), wq=r(D, Q),
                    wk=r(D, KVW), wv=r(D, KVW), wo=r(Q, D), ffn_norm=1 + r(D), w1=r(D, F), w3=r(D, F), w2=r(F, D),
                    q_norm=1 + r(hd), k_norm=1 + r(hd))

    def test_decode_equals_block_for_every_prefill_with_dynamic_beyond_the_context(self):
        c = cfg(qk_norm=True, rope_scaling=scaling(type="dynamic", factor=2.0, original_max_position=12))
        w = self.weights(c, 6)  # positions 2 .. 27: L = 28 > 12
        out = nw.block(**w, config=c)["out"]
        for prefill in range(0, 7):
            np.testing.assert_allclose(nw.decode(**w, config=c, prefill=prefill), out, rtol=1e-5, atol=1e-5 * np.abs(out).max(),
                                       err_msg="prefill %d" % prefill)

    def test_qk_norm_comes_before_rope(self):
        c = cfg(qk_norm=True)
        w = self.weights(c, 4)
        t = nw.block(**w, config=c)
        normed_then_rotated = nw.rope(nw.qk_norm(t["q"], w["q_norm"], config=c), w["positions"], config=c)
        np.testing.assert_array_equal(t["q_rot"], normed_then_rotated)
        rotated_then_normed = nw.qk_norm(nw.rope(t["q"], w["positions"], config=c), w["q_norm"], config=c)
        self.assertFalse(np.allclose(t["q_rot"], rotated_then_normed, atol=1e-3))

    def test_the_taps_compose(self):
        c = cfg()
        w = self.weights(c, 3)
        t = nw.block(**w, config=c)
        np.testing.assert_allclose(t["out"], t["h"] + t["ffn_out"], rtol=1e-6)
        np.testing.assert_allclose(t["h"], w["x"] + t["attn"] @ w["wo"], rtol=1e-6)
        np.testing.assert_array_equal(t["k_rot"], nw.rope(t["k"], w["positions"], config=c))


if __name__ == "__main__":
    unittest.main()
