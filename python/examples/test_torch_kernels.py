"""Kernels on torch tensors (Debian's python3-torch, CPU; device="cuda" for a GPU kernel: docs/pytest.md)."""
import math

import pytest

torch = pytest.importorskip("torch")


def rmsnorm(x, weight, *, norm_eps, norm_plus_one=False):
    scale = 1 + weight if norm_plus_one else weight            # Gemma: the weight is an offset from one
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm_eps) * scale


def attention(q, k, v, q_positions, k_positions, sinks=None, *, n_heads, n_kv_heads, head_dim, sliding_window=0,
              attention_chunk_size=0, attn_logit_softcapping=0.0, attn_scale=0.0):
    q = q.view(-1, n_heads, head_dim).transpose(0, 1)                                            # [H, T, hd]
    k, v = (t.view(-1, n_kv_heads, head_dim).transpose(0, 1).repeat_interleave(n_heads // n_kv_heads, 0) for t in (k, v))
    visible = k_positions[None, :] <= q_positions[:, None]                                       # [T, S]
    if sliding_window > 0:                                     # Mistral / Gemma 2 / gpt-oss: the last W keys only
        visible &= k_positions[None, :] > q_positions[:, None] - sliding_window
    if attention_chunk_size > 0:                               # Llama 4: the query's own chunk of C keys only
        c = attention_chunk_size
        visible &= torch.div(k_positions[None, :], c, rounding_mode="floor") == torch.div(q_positions[:, None], c, rounding_mode="floor")
    scores = q @ k.transpose(1, 2) * (attn_scale or 1 / math.sqrt(head_dim))  # Gemma 2/3: query_pre_attn_scalar ** -0.5
    if attn_logit_softcapping > 0:                             # Gemma 2: cap * tanh(s / cap), before the mask
        scores = torch.tanh(scores / attn_logit_softcapping) * attn_logit_softcapping
    scores = scores.masked_fill(~visible, -math.inf)
    if sinks is not None:                                      # gpt-oss: a logit per head in the denominator, no value
        sink = sinks.reshape(n_heads, 1, 1).expand(n_heads, scores.shape[1], 1)
        p = torch.cat([scores, sink], -1).softmax(-1)[..., :-1]
    else:
        p = scores.softmax(-1)
    p = p.nan_to_num(0.0)                                             # a query that sees no key: zeros
    return (p @ v).transpose(0, 1).reshape(q.shape[1], n_heads * head_dim)


def test_torch_kernels(conform):
    conform.check({"rmsnorm": rmsnorm, "attention": attention}, torch=True, name="torch_kernels")
