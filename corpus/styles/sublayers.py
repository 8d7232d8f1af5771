"""A valid solution in the habits of The Annotated Transformer: a hand-written LayerNorm module, a
residual-connection helper that wraps any sublayer (pre-LN or post-LN), a feed-forward module, einsum for
the products, masks built with torch.where, and the feed-forward network as a method of the block."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.where(mask, torch.full((), -math.inf, dtype=dtype, device=mask.device),
                           torch.zeros((), dtype=dtype, device=mask.device))
    return mask.to(dtype=dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    d_k = q.size(-1)
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    p_attn = scores.softmax(dim=-1)
    p_attn = F.dropout(p_attn, p=dropout_p, training=training)
    return torch.einsum("...ij,...jd->...id", p_attn, v), p_attn


def split_heads(x, num_heads):
    nbatches, length, d_model = x.shape
    return x.view(nbatches, length, num_heads, d_model // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    nbatches, h, length, d_k = x.shape
    return x.permute(0, 2, 1, 3).reshape(nbatches, length, h * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    attn_shape = (seq_len, seq_len)
    subsequent = torch.triu(torch.ones(attn_shape, dtype=torch.bool, device=device), diagonal=1)
    return to_additive_mask(subsequent, dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    size = max_len if max_len is not None else int(lengths.max())
    return torch.arange(size, device=lengths.device)[None, :] >= lengths[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    masks = [to_additive_mask(attn_mask, dtype)]
    if key_padding_mask is not None:
        masks.append(to_additive_mask(key_padding_mask, dtype).unsqueeze(1).unsqueeze(1))
    present = [m for m in masks if m is not None]
    if not present:
        return None
    merged = present[0]
    for m in present[1:]:
        merged = merged + m
    return merged


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.h = self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        query, key, value = [split_heads(t, self.h) for t in self.qkv(x).chunk(3, dim=-1)]
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        x_attn, attn = scaled_dot_product_attention(query, key, value, mask, self.dropout, self.training)
        result = self.out(merge_heads(x_attn))
        return (result, attn) if need_weights else result


class LayerNorm(nn.Module):
    """Normalizes the last dimension, then scales and shifts it by learnable parameters."""

    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


def residual(x, sublayer, norm, dropout, norm_first):
    """A residual connection around `sublayer`, with its LayerNorm before (pre-LN) or after (post-LN)."""
    if norm_first:
        return x + dropout(sublayer(norm(x)))
    return norm(x + dropout(sublayer(x)))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        activations = {"relu": F.relu, "gelu": F.gelu}
        if activation not in activations:
            raise ValueError(f"activation {activation!r} is not relu or gelu")
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.activation = activations[activation]
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout_ff = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def feed_forward(self, x):
        return self.ff2(self.dropout_ff(self.activation(self.ff1(x))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        x = residual(x, lambda y: self.attn(y, attn_mask, key_padding_mask), self.norm1, self.dropout1,
                     self.norm_first)
        return residual(x, self.feed_forward, self.norm2, self.dropout2, self.norm_first)
