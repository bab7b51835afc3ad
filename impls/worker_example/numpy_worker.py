#!/usr/bin/python3
"""numpy_worker — every op of the block in float32 numpy, as a conform worker.

    conform --impl-cmd '/usr/bin/python3 impls/worker_example/numpy_worker.py'

The arithmetic follows HF transformers (Llama, Qwen3): float32 throughout,
RoPE angles as HF computes them (inv_freq a float32 buffer, angle =
float32(pos) * inv_freq in float32), every config field honoured: the rope
layout, theta, rotary_dim, the five rope_scaling types (YaRN's truncate too), qk_norm, qkv_bias, sliding_window, attention_chunk_size,
attn_logit_softcapping, attn_scale, attn_sinks, norm_plus_one, sandwich_norm, nope, hidden_act (GeGLU), kv_cache_dtype (FP8),
norm_eps, GQA.

It announces f32 only; `--dtypes f32,bf16` also offers bf16 (and f16): the
arithmetic stays float32 and conform_worker rounds the outputs to the dtype.
`--angles recurrence` builds the RoPE angles pair by pair instead (ANGLES).

numpy_twin.py reuses these functions with one of them wrong.
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from conform_worker import InvalidArgument, Worker  # noqa: E402

f32 = np.float32

# HF computes RoPE angles in float32 (its inv_freq buffer is float32, and
# float32(pos) * inv_freq is a float32 product): ~1e-3 rad off at position
# 32768. conform's f32 baseline does the same, so this is within its
# tolerance. tests/workers/check_numpy_worker.py also runs with float64 here,
# to check every convention exactly against the golden files.
ANGLE_DTYPE = np.float32

# How the angles are built. "hf": float32(pos) * inv_freq[i], one product per
# angle. "recurrence" (--angles recurrence): angle_i = angle_{i-1} * s with
# s = float32(theta^(-2/rd)), float32 throughout, pair by pair, as several
# CPU engines build them (the scaling, if any, then multiplies pair i by its
# float32 ratio to the unscaled frequency). Both are honest float32 programs;
# the recurrence's angles are ~i ulps off, so at large positions its outputs
# differ from HF's by far more than HF's own rounding, and conform must pass both.
ANGLES = "hf"


def need(ok, message):
    if not ok:
        raise InvalidArgument(message)


# ---- rmsnorm, qk_norm -----------------------------------------------------------

def rmsnorm(x, weight, *, config):
    """out = x * rsqrt(mean(x^2, -1) + eps) * weight, over the last axis
    (Gemma's norm_plus_one: * (1 + weight), the 1 + weight in float32)."""
    need(weight.shape == x.shape[-1:], "rmsnorm: weight %s does not match x %s" % (weight.shape, x.shape))
    ms = np.mean(x * x, axis=-1, keepdims=True, dtype=f32)
    scale = f32(1) + weight if config.get("norm_plus_one") else weight
    return x * (f32(1) / np.sqrt(ms + f32(config["norm_eps"]))) * scale


def qk_norm(x, weight, *, config):
    """Qwen3: RMSNorm of each head's head_dim slice, weight [head_dim]."""
    hd = config["head_dim"]
    need(x.ndim == 2 and x.shape[1] % hd == 0, "qk_norm: x %s is not [T, n * head_dim=%d]" % (x.shape, hd))
    T = x.shape[0]
    return rmsnorm(x.reshape(T, -1, hd), weight, config=config).reshape(T, -1)


# ---- rope -----------------------------------------------------------------------

def rotary_dims(config):
    return config.get("rotary_dim") or config["head_dim"]


def inv_freq(config, seq_len):
    """The (scaled) inverse frequencies [rd/2], formula in float64, kept as
    float32 as HF keeps its inv_freq buffer (modeling_rope_utils.py)."""
    rd = rotary_dims(config)
    theta = np.float64(config["rope_theta"])
    sc = config.get("rope_scaling") or {"type": "none"}
    kind = sc["type"]
    i2 = np.arange(0, rd, 2, dtype=np.float64)  # 2i
    with np.errstate(divide="ignore", over="ignore"):
        if kind == "dynamic":
            # NTK-aware base, only past the original context: inside it, plain RoPE exactly.
            orig = np.float64(sc["original_max_position"])
            if seq_len > orig:
                theta = theta * (sc["factor"] * seq_len / orig - (sc["factor"] - 1)) ** (np.float64(rd) / (rd - 2))
        inv = 1.0 / theta ** (i2 / rd)
    if kind == "linear":
        inv = inv / sc["factor"]
    elif kind == "llama3":
        orig, lo, hi, factor = sc["original_max_position"], sc["low_freq_factor"], sc["high_freq_factor"], sc["factor"]
        wavelen = 2 * math.pi / inv
        smooth = (orig / wavelen - lo) / (hi - lo)
        inv = np.where(wavelen < orig / hi, inv,
                       np.where(wavelen > orig / lo, inv / factor, (1 - smooth) * inv / factor + smooth * inv))
    elif kind == "yarn":
        orig, factor = sc["original_max_position"], sc["factor"]

        def correction_dim(rotations):
            return rd * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(config["rope_theta"]))
        low, high = correction_dim(sc["beta_fast"]), correction_dim(sc["beta_slow"])
        if sc.get("truncate", True):  # gpt-oss: truncate false, the range as found
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, rd - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(rd // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        inv = inv / factor * ramp + inv * (1 - ramp)
    return inv.astype(ANGLE_DTYPE)


def recurrence_angles(positions, config, seq_len):
    """angle[:, i] = angle[:, i-1] * s in float32 [T, rd/2] (ANGLES above)."""
    rd = rotary_dims(config)
    theta = np.float64(config["rope_theta"])
    sc = config.get("rope_scaling") or {"type": "none"}
    if sc["type"] == "dynamic" and seq_len > sc["original_max_position"]:
        orig = np.float64(sc["original_max_position"])  # the NTK base, as inv_freq above
        theta = theta * (sc["factor"] * seq_len / orig - (sc["factor"] - 1)) ** (np.float64(rd) / (rd - 2))
    s = f32(math.pow(theta, -2.0 / rd))
    ang = np.empty((positions.shape[0], rd // 2), dtype=f32)
    a = positions.astype(f32)
    for i in range(rd // 2):
        ang[:, i] = a
        a = a * s  # float32 * float32, rounded once
    if sc["type"] in ("linear", "llama3", "yarn"):
        plain = dict(config, rope_scaling=None)
        ratio = (inv_freq(config, seq_len).astype(np.float64) / inv_freq(plain, seq_len).astype(np.float64)).astype(f32)
        ang = ang * ratio[None, :]
    return ang


def attention_factor(config):
    sc = config.get("rope_scaling") or {"type": "none"}
    return sc["attention_factor"] if sc["type"] == "yarn" else 1.0


def seq_len_of(positions):
    """Dynamic NTK's L: the largest position of the call, plus one."""
    return int(positions.max()) + 1 if positions.size else 1


def rotate(x, positions, config, seq_len):
    """RoPE of x [T, n * hd] at positions [T]; the first rotary_dim dims of
    each head turn, pairs (i, i + rd/2) (neox) or (2i, 2i + 1) (interleaved)."""
    hd, rd = config["head_dim"], rotary_dims(config)
    need(x.ndim == 2 and x.shape[1] % hd == 0, "rope: x %s is not [T, n * head_dim=%d]" % (x.shape, hd))
    need(positions.shape == (x.shape[0],), "rope: positions %s do not match x %s" % (positions.shape, x.shape))
    need(0 < rd <= hd and rd % 2 == 0, "rope: rotary_dim %d must be even and in (0, head_dim=%d]" % (rd, hd))
    T = x.shape[0]
    if ANGLES == "recurrence":
        angle = recurrence_angles(positions, config, seq_len)
    else:
        angle = positions.astype(ANGLE_DTYPE)[:, None] * inv_freq(config, seq_len)[None, :]  # [T, rd/2]
    mscale = ANGLE_DTYPE(attention_factor(config))
    cos = (np.cos(angle) * mscale).astype(f32)[:, None, :]  # [T, 1, rd/2]
    sin = (np.sin(angle) * mscale).astype(f32)[:, None, :]
    xh = x.reshape(T, -1, hd)
    out = xh.copy()
    if config["rope_layout"] == "neox":
        a, b = xh[..., : rd // 2], xh[..., rd // 2: rd]
        out[..., : rd // 2] = a * cos - b * sin
        out[..., rd // 2: rd] = b * cos + a * sin
    else:
        a, b = xh[..., 0:rd:2], xh[..., 1:rd:2]
        out[..., 0:rd:2] = a * cos - b * sin
        out[..., 1:rd:2] = b * cos + a * sin
    return out.reshape(T, -1)


def rope(x, positions, *, config):
    return rotate(x, positions, config, seq_len_of(positions))


# ---- attention ------------------------------------------------------------------

def kv_head(h, n_heads, n_kv_heads):
    """GQA: query head h reads kv head h // (H / KV) (HF repeat_kv)."""
    return h // (n_heads // n_kv_heads)


def in_window(k_pos, q_pos, config):
    """Causal, and with a sliding window W only the last W keys: q_pos - W < k_pos <= q_pos; with
    Llama 4's attention chunks of C only the query's own chunk: k_pos // C == q_pos // C."""
    w, c = config.get("sliding_window", 0), config.get("attention_chunk_size", 0)
    visible = k_pos <= q_pos
    if w > 0:
        visible = visible & (k_pos > q_pos - w)
    if c > 0:
        visible = visible & (np.floor_divide(k_pos, c) == np.floor_divide(q_pos, c))
    return visible


def score_scale(config, width=None):
    """q.k's multiplier: config["attn_scale"] (Gemma 2/3's query_pre_attn_scalar^-1/2), or 1/sqrt(width),
    width the query's (head_dim unless given: MLA's is qk_nope + qk_rope)."""
    given = config.get("attn_scale", 0.0)
    return f32(given if given > 0 else 1.0 / math.sqrt(width or config["head_dim"]))


def soft_cap(scores, config):
    """Gemma 2's attn_logit_softcapping: cap * tanh(s / cap), before the mask (0: none)."""
    cap = config.get("attn_logit_softcapping", 0.0)
    return (f32(cap) * np.tanh(scores / f32(cap))).astype(f32) if cap > 0 else scores


def softmax_rows(scores, visible, sinks):
    """The softmax over each row's visible keys, and its log-sum-exp (-inf
    where a row sees none). sinks [H] (gpt-oss): one more logit per head in
    the denominator, with no value."""
    scores = np.where(visible, scores, f32(-np.inf))
    top = np.max(scores, axis=-1, keepdims=True, initial=f32(-np.inf))
    seen = np.isfinite(top)
    if sinks is not None:
        sinks = sinks.astype(f32).reshape(-1, 1, 1)              # [H, 1, 1]
        top = np.maximum(top, sinks)
    top = np.where(np.isfinite(top), top, f32(0))
    e = np.where(visible, np.exp(scores - top), f32(0))
    total = np.sum(e, axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sinks - top)
    p = e / np.where(total > 0, total, f32(1))                  # rows that see nothing: all zeros
    with np.errstate(divide="ignore"):
        lse = np.where(seen, top + np.log(total), f32(-np.inf))
    return p, lse


def attention(q, k, v, q_positions, k_positions, *, config, sinks=None):
    """softmax(q k^T / sqrt(hd), causal by position) v; a query that sees no key gets zeros."""
    H, KV, hd = config["n_heads"], config["n_kv_heads"], config["head_dim"]
    need(H % KV == 0, "attention: n_heads %d is not a multiple of n_kv_heads %d" % (H, KV))
    T, S = q.shape[0], k.shape[0]
    need(q.shape == (T, H * hd), "attention: q %s is not [T, %d]" % (q.shape, H * hd))
    need(k.shape == (S, KV * hd) and v.shape == (S, KV * hd), "attention: k %s, v %s are not [S, %d]" % (k.shape, v.shape, KV * hd))
    heads = np.array([kv_head(h, H, KV) for h in range(H)], dtype=np.int64)
    qh = q.reshape(T, H, hd).transpose(1, 0, 2)                 # [H, T, hd]
    kh = k.reshape(S, KV, hd)[:, heads].transpose(1, 2, 0)      # [H, hd, S]
    vh = v.reshape(S, KV, hd)[:, heads].transpose(1, 0, 2)      # [H, S, hd]
    scores = soft_cap((qh @ kh) * score_scale(config), config)  # [H, T, S]
    visible = in_window(k_positions[None, :], q_positions[:, None], config)[None]  # [1, T, S]
    p, _ = softmax_rows(scores, visible, sinks if config.get("attn_sinks") else None)
    return (p @ vh).transpose(1, 0, 2).reshape(T, H * hd).astype(f32)


# ---- paged_attention --------------------------------------------------------------

# The FP8 formats of a KV cache (OCP): mantissa bits, exponent bias, largest value.
FP8 = {"fp8_e4m3": (3, 7, 448.0), "fp8_e5m2": (2, 15, 57344.0)}


def fp8_round(x, kind):
    """x (float32) as the FP8 format `kind` stores it, back in float32: round
    to nearest even (np.rint), saturating at the largest value."""
    M, bias, top = FP8[kind]
    a = np.abs(x.astype(np.float64))
    _, e = np.frexp(a)                        # a = m 2^e, 0.5 <= m < 1
    quantum = np.ldexp(1.0, np.maximum(e - 1, 1 - bias) - M)  # subnormals below 2^(1 - bias)
    r = np.minimum(np.rint(a / quantum) * quantum, top)
    return (np.sign(x) * r).astype(f32)


def kv_cache_read(x, scale, config):
    """K or V [S, KV*hd] as an FP8 cache holds them: fp8(x / scale) * scale,
    the division and the product in float32, scale [1, 1] or [1, KV] (kv
    head g's columns scale[g])."""
    kind = config.get("kv_cache_dtype", "none")
    if kind == "none":
        return x
    KV, hd = config["n_kv_heads"], config["head_dim"]
    s = scale.astype(f32).reshape(1, -1, 1)                           # [1, KV or 1, 1]
    code = fp8_round(x.reshape(-1, KV, hd) / s, kind)
    return (code * s).reshape(x.shape)

def batch_sequences(qo_indptr, kv_indptr, kv_indices, kv_last_page_len, P):
    """A paged batch's sequences that have queries and keys: (q0, q1, kv_len,
    rows), its query rows q0 .. q1-1 and the cache rows of its keys in order
    (key i at kv_indices[kv_indptr[b] + i // P] * P + i % P)."""
    for b in range(len(kv_last_page_len)):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]]
        kv_len = 0 if len(pages) == 0 else (len(pages) - 1) * P + int(kv_last_page_len[b])
        if q1 == q0 or kv_len == 0:
            continue
        yield q0, q1, kv_len, (pages[:, None] * P + np.arange(P)[None, :]).reshape(-1)[:kv_len]


def paged_attention(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, *, config, sinks=None,
                    k_scale=None, v_scale=None):
    """A batch over a paged KV cache (FlashInfer's layout): each sequence's
    keys gathered from its pages, its queries the last of its tokens (causal,
    bottom-right); out [T, H*hd] and lse [T, H] (natural log; -inf and zeros
    for a row that sees no key). Rows of the cache no sequence owns are NaN:
    the gather never touches them. An FP8 cache (kv_cache_dtype) is written
    and read back as the gather copies (kv_cache_read)."""
    H, KV, hd, P = config["n_heads"], config["n_kv_heads"], config["head_dim"], config["page_size"]
    need(H % KV == 0 and P > 0, "paged_attention: n_heads %d, n_kv_heads %d, page_size %d" % (H, KV, P))
    T = q.shape[0]
    out = np.zeros((T, H * hd), dtype=f32)
    lse = np.full((T, H), -np.inf, dtype=f32)
    heads = np.array([kv_head(h, H, KV) for h in range(H)], dtype=np.int64)
    for q0, q1, kv_len, rows in batch_sequences(qo_indptr, kv_indptr, kv_indices, kv_last_page_len, P):
        k, v, qs = kv_cache_read(k_cache[rows], k_scale, config), kv_cache_read(v_cache[rows], v_scale, config), q[q0:q1]
        n = q1 - q0
        qh = qs.reshape(n, H, hd).transpose(1, 0, 2)                  # [H, n, hd]
        kh = k.reshape(kv_len, KV, hd)[:, heads].transpose(1, 2, 0)   # [H, hd, S]
        vh = v.reshape(kv_len, KV, hd)[:, heads].transpose(1, 0, 2)   # [H, S, hd]
        scores = soft_cap((qh @ kh) * score_scale(config), config)  # [H, n, S]
        q_pos = np.arange(n) + (kv_len - n)
        visible = in_window(np.arange(kv_len)[None, :], q_pos[:, None], config)[None]  # [1, n, S]
        p, row_lse = softmax_rows(scores, visible, sinks if config.get("attn_sinks") else None)
        out[q0:q1] = (p @ vh).transpose(1, 0, 2).reshape(n, H * hd)
        lse[q0:q1] = row_lse[..., 0].T
    return {"out": out, "lse": lse}


# ---- mla_attention ----------------------------------------------------------------

# A sequence with at most this many queries is a decode step: it takes the absorbed
# form, as MLA decode kernels do (FlashMLA, FlashInfer's MLA), so both forms run here.
MLA_ABSORB_ROWS = 4


def mla_attention(q, ckv_cache, kpe_cache, w_kv_b, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, *, config):
    """DeepSeek-V2/V3's multi-head latent attention, batched over a paged
    latent cache as paged_attention is (same index arrays, causal
    bottom-right). Per head h: k = [ckv @ W_UK_h | kpe], v = ckv @ W_UV_h
    (W_UK_h, W_UV_h: w_kv_b's columns h*(dn+dv) .., dn then dv of them);
    out [T, H*dv], lse [T, H] (natural log; -inf and zeros for a row that
    sees no key). A decode step (MLA_ABSORB_ROWS) scores q_nope @ W_UK_h^T
    against ckv and maps sum p ckv through W_UV_h: the same function. Rows
    of the pools no sequence owns are NaN: the gather never touches them."""
    H, dc, P = config["n_heads"], config["kv_lora_rank"], config["page_size"]
    dn, dr, dv = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    need(H > 0 and dc > 0 and dn > 0 and dr > 0 and dv > 0 and P > 0,
         "mla_attention: n_heads %d, kv_lora_rank %d, qk_nope_head_dim %d, qk_rope_head_dim %d, v_head_dim %d, "
         "page_size %d" % (H, dc, dn, dr, dv, P))
    T, S = q.shape[0], ckv_cache.shape[0]
    need(q.shape == (T, H * (dn + dr)), "mla_attention: q %s is not [T, %d]" % (q.shape, H * (dn + dr)))
    need(ckv_cache.shape == (S, dc) and kpe_cache.shape == (S, dr), "mla_attention: ckv_cache %s, kpe_cache %s "
         "are not [S, %d], [S, %d]" % (ckv_cache.shape, kpe_cache.shape, dc, dr))
    need(w_kv_b.shape == (dc, H * (dn + dv)),
         "mla_attention: w_kv_b %s is not [%d, %d]" % (w_kv_b.shape, dc, H * (dn + dv)))
    out = np.zeros((T, H * dv), dtype=f32)
    lse = np.full((T, H), -np.inf, dtype=f32)
    scale = score_scale(config, dn + dr)
    w = w_kv_b.reshape(dc, H, dn + dv).transpose(1, 0, 2)           # [H, dc, dn+dv]
    w_uk, w_uv = w[..., :dn], w[..., dn:]                            # [H, dc, dn], [H, dc, dv]
    for q0, q1, kv_len, rows in batch_sequences(qo_indptr, kv_indptr, kv_indices, kv_last_page_len, P):
        ckv, kpe = ckv_cache[rows], kpe_cache[rows]                  # [S, dc], [S, dr]
        n = q1 - q0
        qh = q[q0:q1].reshape(n, H, dn + dr).transpose(1, 0, 2)     # [H, n, dn+dr]
        q_nope, q_pe = qh[..., :dn], qh[..., dn:]
        q_pos = np.arange(n) + (kv_len - n)
        visible = (np.arange(kv_len)[None, :] <= q_pos[:, None])[None]  # [1, n, S]
        if n <= MLA_ABSORB_ROWS:
            q_lat = q_nope @ w_uk.transpose(0, 2, 1)                 # [H, n, dc]
            scores = (q_lat @ ckv.T + q_pe @ kpe.T) * scale          # [H, n, S]
            p, row_lse = softmax_rows(scores, visible, None)
            o = (p @ ckv) @ w_uv                                     # [H, n, dv]
        else:
            k_nope, v = ckv @ w_uk, ckv @ w_uv                       # [H, S, dn], [H, S, dv]
            k = np.concatenate([k_nope, np.broadcast_to(kpe, (H, kv_len, dr))], axis=-1)  # [H, S, dn+dr]
            scores = (qh @ k.transpose(0, 2, 1)) * scale             # [H, n, S]
            p, row_lse = softmax_rows(scores, visible, None)
            o = p @ v
        out[q0:q1] = o.transpose(1, 0, 2).reshape(n, H * dv)
        lse[q0:q1] = row_lse[..., 0].T
    return {"out": out, "lse": lse}


# ---- swiglu ---------------------------------------------------------------------

def swiglu(x, w1, w3, w2, *, config=None):
    """(act(x @ w1) * (x @ w3)) @ w2, act = silu, or gelu_tanh (GeGLU: config hidden_act).

    gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))), computed as
    a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)), the same function."""
    gate = x @ w1
    z = gate
    if config is not None and config.get("hidden_act", "silu") == "gelu_tanh":
        z = f32(2 * math.sqrt(2 / math.pi)) * (gate + f32(0.044715) * gate * gate * gate)
    with np.errstate(over="ignore"):
        act = gate / (f32(1) + np.exp(-z))
    return (act * (x @ w3)) @ w2


# ---- a mixture of experts (docs/moe.md) ------------------------------------------

def moe_route(x, w_router, router_bias=None, e_bias=None, *, config):
    """route[T, E]: each token's weight on its K experts, 0 elsewhere (HF DeepseekV3TopkRouter,
    route_tokens_to_experts; Mixtral's and Qwen3-MoE's are its softmax case)."""
    T, E, K = x.shape[0], config["n_experts"], config["n_experts_per_tok"]
    logits = x @ w_router
    if config.get("moe_router_bias"):
        logits = logits + router_bias
    if config.get("moe_scoring", "softmax") == "softmax":
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        scores = e / e.sum(axis=1, keepdims=True)
    else:
        with np.errstate(over="ignore"):
            scores = f32(1) / (f32(1) + np.exp(-logits))
    choice = scores + e_bias if config.get("moe_selection_bias") else scores.copy()
    G = config.get("moe_n_group", 0)
    if G > 0:  # grouped top-k: the groups not among the topk_group best masked with -inf
        grouped = np.sort(choice.reshape(T, G, E // G), axis=2)[:, :, ::-1]
        group = grouped[:, :, 0] if config.get("moe_group_score") == "max" or E // G < 2 else grouped[:, :, 0] + grouped[:, :, 1]
        kept = np.argsort(-group, axis=1, kind="stable")[:, :config["moe_topk_group"]]
        mask = np.zeros((T, G), bool)
        np.put_along_axis(mask, kept, True, axis=1)
        choice = np.where(np.repeat(mask, E // G, axis=1), choice, f32(-np.inf))
    idx = np.argsort(-choice, axis=1, kind="stable")[:, :K]
    weights = np.take_along_axis(scores, idx, axis=1)
    if config.get("moe_norm_topk_prob"):
        weights = weights / (weights.sum(axis=1, keepdims=True) + f32(1e-20))
    if config.get("moe_routed_scaling_factor", 0) > 0:
        weights = weights * f32(config["moe_routed_scaling_factor"])
    route = np.zeros((T, E), f32)
    np.put_along_axis(route, idx, weights.astype(f32), axis=1)
    return route


def glu(h, interleaved, limit):
    """silu(gate) * up, or gpt-oss's min(gate, L) * sigmoid(1.702 min(gate, L)) * (clamp(up, -L, L) + 1)."""
    F = h.shape[1] // 2
    gate, up = (h[:, 0::2], h[:, 1::2]) if interleaved else (h[:, :F], h[:, F:])
    with np.errstate(over="ignore"):
        if limit > 0:
            g = np.minimum(gate, f32(limit))
            return g / (f32(1) + np.exp(f32(-1.702) * g)) * (np.clip(up, f32(-limit), f32(limit)) + f32(1))
        return gate / (f32(1) + np.exp(-gate)) * up


def moe_experts(x, route, w13, w2, b13=None, b2=None, ws13=None, ws2=None, ws_gate=None, *, config):
    """out[T, D] = sum over the chosen experts of route * expert(x) (+ the shared expert)."""
    D, E, F = x.shape[1], config["n_experts"], config["moe_ffn_dim"]
    on_input, bias = config.get("moe_weight_on_input"), config.get("moe_expert_bias")
    interleaved, limit = config.get("moe_gate_up_interleaved"), config.get("moe_swiglu_limit", 0)
    out = np.zeros_like(x)
    for e in range(E):
        tokens = np.nonzero(route[:, e])[0]
        if tokens.size == 0:
            continue
        r = route[tokens, e][:, None]
        xe = x[tokens] * r if on_input else x[tokens]  # Llama 4: the weight on the expert's input
        h = xe @ w13[e * D:(e + 1) * D]
        if bias:
            h = h + b13[e]
        y = glu(h, interleaved, limit) @ w2[e * F:(e + 1) * F]
        if bias:
            y = y + b2[e]  # gpt-oss: the down bias before the routing weight
        out[tokens] += y if on_input else r * y
    if config.get("moe_shared_ffn_dim", 0) > 0:
        shared = glu(x @ ws13, False, 0) @ ws2
        if config.get("moe_shared_gate"):  # Qwen2-MoE's shared_expert_gate
            with np.errstate(over="ignore"):
                shared = shared / (f32(1) + np.exp(-(x @ ws_gate)))
        out = out + shared
    return out


def moe(x, w_router, w13, w2, router_bias=None, e_bias=None, b13=None, b2=None, ws13=None, ws2=None, ws_gate=None, *,
        config):
    route = moe_route(x, w_router, router_bias, e_bias, config=config)
    return {"route": route, "out": moe_experts(x, route, w13, w2, b13, b2, ws13, ws2, ws_gate, config=config)}


# ---- block, decode --------------------------------------------------------------

class KvCache:
    """What persists between decode steps: rotated keys and (never rotated) values."""

    def __init__(self, width):
        self.k = np.zeros((0, width), f32)
        self.v = np.zeros((0, width), f32)
        self.pos = np.zeros((0,), np.int64)

    def append(self, k_rot, v, positions):
        self.k = np.concatenate([self.k, k_rot])
        self.v = np.concatenate([self.v, v])
        self.pos = np.concatenate([self.pos, positions])


def forward(x, positions, w, config, cache, seq_len):
    """One forward of the layer over the rows of x, attending over the cache
    plus these rows; returns every tap."""
    t = {}
    t["attn_in"] = rmsnorm(x, w["attn_norm"], config=config)
    t["q"], t["k"], t["v"] = t["attn_in"] @ w["wq"], t["attn_in"] @ w["wk"], t["attn_in"] @ w["wv"]
    if config.get("qkv_bias"):  # Qwen2: nn.Linear(bias=True), so the taps q, k, v include it
        t["q"], t["k"], t["v"] = t["q"] + w["bq"], t["k"] + w["bk"], t["v"] + w["bv"]
    q, k = t["q"], t["k"]
    if config["qk_norm"]:  # Qwen3: per head, before RoPE; v never
        q, k = qk_norm(q, w["q_norm"], config=config), qk_norm(k, w["k_norm"], config=config)
    if config.get("nope"):  # a NoPE layer (SmolLM3, Llama 4): q and k unrotated
        t["q_rot"], t["k_rot"] = q, k
    else:
        t["q_rot"], t["k_rot"] = rotate(q, positions, config, seq_len), rotate(k, positions, config, seq_len)
    # an FP8 cache (decode): what is cached is what the cache gives back
    cache.append(kv_cache_read(t["k_rot"], w.get("k_scale"), config), kv_cache_read(t["v"], w.get("v_scale"), config),
                 positions)
    t["attn"] = attention(t["q_rot"], cache.k, cache.v, positions, cache.pos, config=config, sinks=w.get("sinks"))
    # Gemma 2/3's sandwich norms: each sublayer's output normed before its residual add
    post = config.get("sandwich_norm")
    proj = t["attn"] @ w["wo"]
    t["h"] = x + (rmsnorm(proj, w["attn_post_norm"], config=config) if post else proj)
    t["ffn_in"] = rmsnorm(t["h"], w["ffn_norm"], config=config)
    t["ffn_out"] = swiglu(t["ffn_in"], w["w1"], w["w3"], w["w2"], config=config)
    t["out"] = t["h"] + (rmsnorm(t["ffn_out"], w["ffn_post_norm"], config=config) if post else t["ffn_out"])
    return t


def check_block(x, positions, w, config):
    need(x.ndim == 2 and x.shape[1] == config["d_model"], "block: x %s is not [T, d_model=%d]" % (x.shape, config["d_model"]))
    need(positions.shape == (x.shape[0],), "block: positions %s do not match x %s" % (positions.shape, x.shape))
    if config["qk_norm"]:
        need(w.get("q_norm") is not None and w.get("k_norm") is not None, "block: qk_norm is on but q_norm, k_norm are missing")
    if config.get("qkv_bias"):
        need(all(w.get(b) is not None for b in ("bq", "bk", "bv")), "block: qkv_bias is on but bq, bk, bv are missing")
    if config.get("attn_sinks"):
        need(w.get("sinks") is not None, "block: attn_sinks is on but sinks are missing")
    if config.get("sandwich_norm"):
        need(w.get("attn_post_norm") is not None and w.get("ffn_post_norm") is not None,
             "block: sandwich_norm is on but attn_post_norm, ffn_post_norm are missing")
    if config.get("kv_cache_dtype", "none") != "none":
        need(w.get("k_scale") is not None and w.get("v_scale") is not None,
             "decode: an FP8 cache needs k_scale and v_scale")


def block(x, positions, *, config, **weights):
    check_block(x, positions, weights, config)
    cache = KvCache(config["n_kv_heads"] * config["head_dim"])
    return forward(x, positions, weights, config, cache, seq_len_of(positions))


def decode(x, positions, *, config, prefill, **weights):
    """The first `prefill` tokens in one forward, then one token at a time
    through the KV cache. RoPE is the whole call's (dynamic NTK's L from
    every position), so the result equals block() over all T."""
    check_block(x, positions, weights, config)
    T = x.shape[0]
    need(0 <= prefill <= T, "decode: prefill %d is not in [0, T=%d]" % (prefill, T))
    cache = KvCache(config["n_kv_heads"] * config["head_dim"])
    L = seq_len_of(positions)
    rows = []
    if prefill > 0:
        rows.append(forward(x[:prefill], positions[:prefill], weights, config, cache, L)["out"])
    for t in range(prefill, T):
        rows.append(forward(x[t:t + 1], positions[t:t + 1], weights, config, cache, L)["out"])
    return np.concatenate(rows) if rows else np.zeros((0, config["d_model"]), f32)


# ---- the worker -----------------------------------------------------------------

KNOWN_SCALING = ("none", "linear", "llama3", "yarn", "dynamic")
OPS = {"rmsnorm": rmsnorm, "rope": rope, "qk_norm": qk_norm, "attention": attention,
       "swiglu": swiglu, "block": block, "decode": decode, "paged_attention": paged_attention,
       "moe": moe, "moe_route": moe_route, "moe_experts": moe_experts, "mla_attention": mla_attention}


def supports(op, config, dtype):
    """Decline what this file does not know (a later protocol may add
    layouts or scaling types): a case declined is not run, never passed."""
    if op in ("rope", "block", "decode"):
        if config.get("rope_layout") not in ("neox", "interleaved"):
            return False, "rope_layout %r is not one this worker knows" % (config.get("rope_layout"),)
        kind = (config.get("rope_scaling") or {"type": "none"}).get("type")
        if kind not in KNOWN_SCALING:
            return False, "rope_scaling type %r is not one this worker knows" % (kind,)
    if config.get("hidden_act", "silu") not in ("silu", "gelu_tanh"):
        return False, "hidden_act %r is not one this worker knows" % (config.get("hidden_act"),)
    if config.get("kv_cache_dtype", "none") not in ("none",) + tuple(FP8):
        return False, "kv_cache_dtype %r is not one this worker knows" % (config.get("kv_cache_dtype"),)
    return True, ""


# Every twist (`conform list --twists`): these kernels compute them all.
TWISTS = ("qk_norm", "rotary_dim", "rope_scaling", "qkv_bias", "sliding_window", "attention_chunk_size",
          "attn_logit_softcapping", "attn_sinks", "attn_scale", "norm_plus_one", "sandwich_norm", "nope", "hidden_act",
          "kv_cache_dtype", "kv_scale_per_head", "rope_scaling.truncate", "moe_scoring", "moe_router_bias",
          "moe_selection_bias", "moe_n_group", "moe_topk_group", "moe_group_score", "moe_norm_topk_prob",
          "moe_routed_scaling_factor", "moe_weight_on_input", "moe_gate_up_interleaved", "moe_swiglu_limit",
          "moe_expert_bias", "moe_shared_ffn_dim", "moe_shared_gate")


def make_worker(name="numpy", description="float32 numpy, HF conventions", dtypes=("f32",)):
    w = Worker(name, dtypes=dtypes, description=description, twists=TWISTS)
    for op, fn in OPS.items():
        w.op(op)(fn)
    w.supports(supports)
    return w


def main(name="numpy", description="float32 numpy, HF conventions"):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--dtypes", default="f32", help="comma-separated dtypes to announce (f32, bf16, f16)")
    ap.add_argument("--angles", choices=("hf", "recurrence"), default="hf",
                    help="how RoPE angles are built in float32 (see ANGLES)")
    args = ap.parse_args()
    global ANGLES
    ANGLES = args.angles
    make_worker(name, description, args.dtypes.split(",")).run()


if __name__ == "__main__":
    main()
