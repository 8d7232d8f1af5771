"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

(written nanoGPT-style: one fused qkv projection, split, view+transpose into heads)

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros_like(mask, dtype=dtype).masked_fill(mask, float('-inf'))
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if attn_mask is not None:
        att = att + to_additive_mask(attn_mask, att.dtype)
    att = F.softmax(att, dim=-1)
    if training:
        att = F.dropout(att, p=dropout_p, training=True)
    y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    return y, att


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, T, C = x.size()
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, T, hs)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, nh, T, hs = x.size()
    return x.transpose(1, 2).contiguous().view(B, T, nh * hs)  # re-assemble all head outputs side by side


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    tril = torch.tril(torch.ones(seq_len, seq_len, device=device))
    return torch.zeros(seq_len, seq_len, device=device, dtype=dtype).masked_fill(tril == 0, float('-inf'))


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(lengths, dtype=torch.long)
    T = int(lengths.max()) if max_len is None else max_len
    return torch.arange(T, device=lengths.device)[None, :] >= lengths[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    if attn_mask is None and key_padding_mask is None:
        return None
    m = torch.zeros((), dtype=dtype, device=(attn_mask if attn_mask is not None else key_padding_mask).device)
    if attn_mask is not None:
        m = m + to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        m = m + to_additive_mask(key_padding_mask, dtype)[:, None, None, :]
    return m


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"n_head={num_heads} must divide n_embd={d_model}")
        # key, query, value projections for all heads, but in a batch
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        # output projection
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.n_embd = d_model
        self.dropout = dropout

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        k = split_heads(k, self.num_heads)  # (B, nh, T, hs)
        q = split_heads(q, self.num_heads)  # (B, nh, T, hs)
        v = split_heads(v, self.num_heads)  # (B, nh, T, hs)

        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        y, att = scaled_dot_product_attention(q, k, v, mask, self.dropout if self.training else 0.0,
                                              self.training)
        y = merge_heads(y)

        # output projection
        y = self.out(y)
        return (y, att) if need_weights else y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ('relu', 'gelu'):
            raise ValueError(f"activation {activation} not supported")
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.act = nn.ReLU() if activation == 'relu' else nn.GELU()
        self.attn_dropout = nn.Dropout(dropout)
        self.mlp_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def mlp(self, x):
        return self.resid_dropout(self.ff2(self.mlp_dropout(self.act(self.ff1(x)))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        if self.norm_first:
            x = x + self.attn_dropout(self.attn(self.norm1(x), attn_mask, key_padding_mask))
            x = x + self.mlp(self.norm2(x))
        else:
            x = self.norm1(x + self.attn_dropout(self.attn(x, attn_mask, key_padding_mask)))
            x = self.norm2(x + self.mlp(x))
        return x
