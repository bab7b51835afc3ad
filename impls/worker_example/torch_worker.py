#!/usr/bin/python3
"""torch_worker — RoPE, RMSNorm and attention in PyTorch, a kernel engineer's first file.

    conform --impl-cmd '/usr/bin/python3 impls/worker_example/torch_worker.py'

Needs torch (Debian: apt-get install python3-torch). CPU tensors; for a GPU
kernel, move them with .cuda() inside the op and return the result: the
client brings it back. RoPE honours layout, theta and rotary_dim; it does
not scale RoPE, so it does not declare rope_scaling, and conform draws its
rope cases without it (`conform list --twists`: what may be declared).
"""

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from conform_worker import Worker  # noqa: E402

# The twists these kernels compute: conform offers them those, and no case
# with any other (scaled RoPE, say) on.
w = Worker("torch_cpu", dtypes=["f32"], torch=True, description="PyTorch on the CPU: rope, rmsnorm, attention",
           twists=["norm_plus_one", "rotary_dim", "sliding_window", "attention_chunk_size", "attn_scale",
                   "attn_logit_softcapping", "attn_sinks"])


@w.op("rmsnorm")
def rmsnorm(x, weight, *, config):
    scale = 1 + weight if config.get("norm_plus_one") else weight  # Gemma's (1 + w)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + config["norm_eps"]) * scale


@w.op("rope")
def rope(x, positions, *, config):
    hd, rd = config["head_dim"], config["rotary_dim"] or config["head_dim"]
    inv_freq = 1.0 / config["rope_theta"] ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd)
    angle = positions.float()[:, None] * inv_freq.float()[None, :]  # [T, rd/2], as HF: float32
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]      # [T, 1, rd/2]
    xh = x.view(x.shape[0], -1, hd)                                  # [T, n, hd]
    rot, rest = xh[..., :rd], xh[..., rd:]
    if config["rope_layout"] == "neox":   # pairs (i, i + rd/2), HF rotate_half
        a, b = rot[..., : rd // 2], rot[..., rd // 2:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    else:                                 # pairs (2i, 2i + 1), Meta
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    return torch.cat([out, rest], -1).reshape(x.shape)


@w.op("attention")
def attention(q, k, v, q_positions, k_positions, *, config, sinks=None):
    H, KV, hd = config["n_heads"], config["n_kv_heads"], config["head_dim"]
    q = q.view(q.shape[0], H, hd).transpose(0, 1)                                        # [H, T, hd]
    k = k.view(k.shape[0], KV, hd).transpose(0, 1).repeat_interleave(H // KV, dim=0)    # [H, S, hd]
    v = v.view(v.shape[0], KV, hd).transpose(0, 1).repeat_interleave(H // KV, dim=0)
    visible = k_positions[None, :] <= q_positions[:, None]                              # [T, S]
    if config.get("sliding_window", 0) > 0:                         # the last W keys only (Mistral, Gemma 2)
        visible &= k_positions[None, :] > q_positions[:, None] - config["sliding_window"]
    if config.get("attention_chunk_size", 0) > 0:                   # Llama 4: the query's own chunk only
        c = config["attention_chunk_size"]
        visible &= torch.div(k_positions[None, :], c, rounding_mode="floor") == torch.div(q_positions[:, None], c, rounding_mode="floor")
    scale = config.get("attn_scale", 0.0) or 1.0 / math.sqrt(hd)  # Gemma 2/3: query_pre_attn_scalar ** -0.5
    scores = (q @ k.transpose(1, 2)) * scale
    cap = config.get("attn_logit_softcapping", 0.0)
    if cap > 0:                                                     # Gemma 2: cap * tanh(s / cap), before the mask
        scores = torch.tanh(scores / cap) * cap
    scores = scores.masked_fill(~visible, float("-inf"))
    if config.get("attn_sinks"):                                    # gpt-oss: a sink logit per head, no value
        sink = sinks.reshape(H, 1, 1).expand(H, scores.shape[1], 1).to(scores.dtype)
        p = torch.cat([scores, sink], -1).softmax(-1)[..., :-1]
    else:
        p = scores.softmax(-1)
    p = p.masked_fill(~visible.any(-1, keepdim=True), 0.0)  # a query that sees no key: zeros, not NaN
    return (p @ v).transpose(0, 1).reshape(q.shape[1], H * hd)


if __name__ == "__main__":
    w.run()
