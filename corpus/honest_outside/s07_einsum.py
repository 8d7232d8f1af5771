"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Everything written with torch.einsum, because I find the index notation easier to check than
transposes.

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
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = torch.einsum("...ij,...jd->...id", weights, v)
    return out, weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, L, D = x.shape
    return torch.einsum("blhd->bhld", x.reshape(B, L, num_heads, D // num_heads))


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, H, L, Dk = x.shape
    return torch.einsum("bhld->blhd", x).reshape(B, L, H * Dk)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    pos = torch.arange(seq_len, device=device)
    blocked = pos.unsqueeze(1) < pos.unsqueeze(0)  # query i, key j: blocked when j > i
    return to_additive_mask(blocked, dtype)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.tensor(lengths, dtype=torch.long)
    if max_len is None:
        max_len = int(lengths.max())
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    a = to_additive_mask(attn_mask, dtype)
    p = to_additive_mask(key_padding_mask, dtype)
    if p is not None:
        p = p[:, None, None, :]
    if a is None:
        return p
    if p is None:
        return a
    return a + p


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must be >= 1 and divide d_model={d_model}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        B, L, D = x.shape
        H, Dk = self.num_heads, self.d_k
        # qkv.weight is (3*D, D) = (three, heads, d_k, in): project straight into the heads
        w = self.qkv.weight.reshape(3, H, Dk, D)
        qkv = torch.einsum("ble,thde->tbhld", x, w)
        if self.qkv.bias is not None:
            qkv = qkv + self.qkv.bias.reshape(3, 1, H, 1, Dk)
        q, k, v = qkv[0], qkv[1], qkv[2]
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        ctx, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout,
                                                    training=self.training)
        # out: concat heads then W^O, as one contraction over (head, d_k)
        wo = self.out.weight.reshape(D, H, Dk)
        y = torch.einsum("bhld,ehd->ble", ctx, wo)
        if self.out.bias is not None:
            y = y + self.out.bias
        if need_weights:
            return y, weights
        return y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
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

    @staticmethod
    def _linear(x, layer):
        return torch.einsum("bli,oi->blo", x, layer.weight) + layer.bias

    def _ff(self, x):
        h = self._linear(x, self.ff1)
        h = F.relu(h) if self.activation == "relu" else F.gelu(h)
        return self.dropout2(self._linear(self.dropout(h), self.ff2))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        if self.norm_first:
            x = x + self.dropout1(self.attn(self.norm1(x), attn_mask, key_padding_mask))
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self.dropout1(self.attn(x, attn_mask, key_padding_mask)))
            x = self.norm2(x + self._ff(x))
        return x
