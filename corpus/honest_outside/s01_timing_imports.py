"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.
"""
import functools
import logging
import math
import os
import random
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger(__name__)
# set MHSA_DEBUG=1 to see the timings
if os.environ.get("MHSA_DEBUG"):
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG)

_TIMINGS = {}


def timed(fn):
    """Decorator: remembers how long each call took (debug only)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        dt = time.perf_counter() - t0
        _TIMINGS.setdefault(fn.__qualname__, []).append(dt)
        logger.debug("%s took %.3f ms", fn.__qualname__, dt * 1e3)
        return result
    return wrapper


def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return zeros.masked_fill(mask, float("-inf"))
    return mask.to(dtype)


@timed
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    mask = to_additive_mask(attn_mask, scores.dtype)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = torch.matmul(weights, v)
    return out, weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, L, d_model = x.shape
    d_k = d_model // num_heads
    return x.reshape(B, L, num_heads, d_k).transpose(1, 2)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, h * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    full = torch.full((seq_len, seq_len), float("-inf"), dtype=dtype, device=device)
    return torch.triu(full, diagonal=1)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.tensor(lengths, dtype=torch.long)
    if max_len is None:
        max_len = int(lengths.max())
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    if attn_mask is None and key_padding_mask is None:
        return None
    merged = None
    if attn_mask is not None:
        merged = to_additive_mask(attn_mask, dtype)
        if merged.dim() == 2:
            merged = merged.unsqueeze(0).unsqueeze(0)
    if key_padding_mask is not None:
        kpm = to_additive_mask(key_padding_mask, dtype)
        kpm = kpm[:, None, None, :]
        merged = kpm if merged is None else merged + kpm
    return merged


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got {num_heads}")
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads ({num_heads}) must divide d_model ({d_model})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    @timed
    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = split_heads(q, self.num_heads)
        k = split_heads(k, self.num_heads)
        v = split_heads(v, self.num_heads)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout,
                                                    training=self.training)
        out = self.out(merge_heads(out))
        if need_weights:
            return out, weights
        return out


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.activation = activation
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _act(self, x):
        return F.relu(x) if self.activation == "relu" else F.gelu(x)

    def _sa(self, x, attn_mask, key_padding_mask):
        return self.dropout1(self.attn(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

    def _ff(self, x):
        return self.dropout2(self.ff2(self.dropout(self._act(self.ff1(x)))))

    @timed
    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        if self.norm_first:
            x = x + self._sa(self.norm1(x), attn_mask, key_padding_mask)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, attn_mask, key_padding_mask))
            x = self.norm2(x + self._ff(x))
        return x


if __name__ == "__main__":
    random.seed(0)
    torch.manual_seed(0)
    warnings.simplefilter("default")
    B, L, d_model, h = 8, 128, 256, 8
    x = torch.randn(B, L, d_model)
    for name, module in [("mhsa", MultiHeadSelfAttention(d_model, h)),
                         ("block", TransformerBlock(d_model, h, 4 * d_model))]:
        module.eval()
        with torch.no_grad():
            module(x)  # warm-up
            t0 = time.time()
            for _ in range(20):
                module(x, attn_mask=causal_mask(L))
            t1 = time.time()
        print(f"{name}: {(t1 - t0) / 20 * 1e3:.2f} ms per forward (B={B}, L={L}, d_model={d_model})")
    for fn_name, times in _TIMINGS.items():
        print(f"  {fn_name}: {len(times)} calls, mean {sum(times) / len(times) * 1e3:.3f} ms")
