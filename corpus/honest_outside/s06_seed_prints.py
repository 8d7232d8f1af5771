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

torch.manual_seed(1234)  # reproducible while I debug
print("mhsa.py loaded, torch", torch.__version__)


def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float('-inf'))
    return mask.to(dtype=dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    # print("scores", scores.shape)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = weights @ v
    return out, weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, L, d_model = x.shape
    x = x.view(B, L, num_heads, d_model // num_heads)
    x = x.permute(0, 2, 1, 3)
    return x


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, h, L, d_k = x.shape
    x = x.permute(0, 2, 1, 3)
    return x.reshape(B, L, h * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    mask = torch.triu(torch.ones(seq_len, seq_len, device=device), diagonal=1).bool()
    return to_additive_mask(mask, dtype)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if isinstance(lengths, list):
        lengths = torch.tensor(lengths)
    if max_len is None:
        max_len = int(max(lengths))
    idx = torch.arange(max_len, device=lengths.device)
    return idx.expand(lengths.shape[0], max_len) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    if attn_mask is None and key_padding_mask is None:
        return None
    mask = 0
    if attn_mask is not None:
        mask = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        B, Lk = key_padding_mask.shape
        mask = mask + to_additive_mask(key_padding_mask, dtype).view(B, 1, 1, Lk)
    return mask


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError("bad num_heads")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        print(f"MultiHeadSelfAttention: d_model={d_model} heads={num_heads} d_k={self.d_k}")

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        print("x:", tuple(x.shape), x.dtype)
        qkv = self.qkv(x)
        q, k, v = torch.split(qkv, self.d_model, dim=-1)
        q, k, v = split_heads(q, self.num_heads), split_heads(k, self.num_heads), split_heads(v, self.num_heads)
        print("q/k/v:", tuple(q.shape))
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        if mask is not None:
            print("mask:", tuple(mask.shape))
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        out = self.out(merge_heads(out))
        print("out:", tuple(out.shape), "weights:", tuple(weights.shape))
        if need_weights:
            return out, weights
        return out


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation == "relu":
            self.act = F.relu
        elif activation == "gelu":
            self.act = F.gelu
        else:
            raise ValueError("unknown activation: " + str(activation))
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.drop1 = nn.Dropout(dropout)
        self.drop2 = nn.Dropout(dropout)
        self.drop3 = nn.Dropout(dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        print("block in:", tuple(x.shape))
        if self.norm_first:
            x = x + self.drop1(self.attn(self.norm1(x), attn_mask, key_padding_mask))
            x = x + self.drop3(self.ff2(self.drop2(self.act(self.ff1(self.norm2(x))))))
        else:
            x = self.norm1(x + self.drop1(self.attn(x, attn_mask, key_padding_mask)))
            x = self.norm2(x + self.drop3(self.ff2(self.drop2(self.act(self.ff1(x))))))
        print("block out:", tuple(x.shape))
        return x


x = torch.randn(2, 5, 16)
print("smoke test:", tuple(MultiHeadSelfAttention(16, 4)(x).shape))
