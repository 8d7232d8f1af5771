"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill(mask, float("-inf"))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    d_k = q.shape[-1]
    scores = q.matmul(k.transpose(-2, -1)).div(math.sqrt(d_k))
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = scores.softmax(dim=-1)
    if training and dropout_p:
        weights = F.dropout(weights, dropout_p, True)
    return weights.matmul(v), weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    b, l, d = x.shape
    return x.unflatten(-1, (num_heads, d // num_heads)).transpose(1, 2)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    return x.transpose(1, 2).flatten(-2)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    return torch.full((seq_len, seq_len), float("-inf"), device=device, dtype=dtype).triu(1)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(lengths)
    if max_len is None:
        max_len = int(lengths.max())
    ar = torch.arange(max_len, device=lengths.device)
    return ar.unsqueeze(0) >= lengths.unsqueeze(-1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    if attn_mask is None and key_padding_mask is None:
        return None
    if key_padding_mask is None:
        return to_additive_mask(attn_mask, dtype)
    kpm = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]
    if attn_mask is None:
        return kpm
    return to_additive_mask(attn_mask, dtype) + kpm


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if not num_heads >= 1:
            raise ValueError(f"{self.__class__.__name__}: num_heads must be >= 1 (got {num_heads})")
        if d_model % num_heads != 0:
            raise ValueError(f"{self.__class__.__name__}: d_model={d_model} must be divisible "
                             f"by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.bias = bias
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def extra_repr(self):
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, d_k={self.d_k}, "
                f"dropout={self.dropout}, bias={self.bias}")

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        q, k, v = self.qkv(x).split(self.d_model, dim=-1)
        q = split_heads(q, self.num_heads)
        k = split_heads(k, self.num_heads)
        v = split_heads(v, self.num_heads)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        ctx, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout,
                                                    training=self.training)
        y = self.out(merge_heads(ctx))
        if need_weights:
            return y, weights
        return y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in {"relu", "gelu"}:
            raise ValueError(f"{self.__class__.__name__}: unsupported activation {activation!r}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.p = dropout
        self.activation = activation
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)   # after self-attention
        self.dropout_ff = nn.Dropout(dropout)  # after the activation
        self.dropout2 = nn.Dropout(dropout)   # after ff2

    def __repr__(self):
        # shorter than the default nn.Module repr, one line per block in a stack
        kind = "pre-LN" if self.norm_first else "post-LN"
        return (f"{self.__class__.__name__}(d_model={self.d_model}, heads={self.num_heads}, "
                f"d_ff={self.d_ff}, {self.activation}, {kind}, dropout={self.p})")

    def _activation(self, x):
        if self.activation == "gelu":
            return F.gelu(x, approximate="none")
        return F.relu(x)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        def sa(t):
            return self.dropout1(self.attn(t, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

        def ff(t):
            return self.dropout2(self.ff2(self.dropout_ff(self._activation(self.ff1(t)))))

        if self.norm_first:
            x = x + sa(self.norm1(x))
            return x + ff(self.norm2(x))
        x = self.norm1(x + sa(x))
        return self.norm2(x + ff(x))
