"""A valid solution in einsum style: named index strings instead of transposes."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    blocked = torch.tensor(float("-inf"), dtype=dtype, device=mask.device)
    return torch.where(mask, blocked, torch.zeros((), dtype=dtype, device=mask.device))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = F.dropout(scores.softmax(dim=-1), p=dropout_p, training=training)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def split_heads(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)


def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(2)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    later = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(seq_len, seq_len, dtype=dtype, device=device).masked_fill(later, float("-inf"))


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    width = int(lengths.max()) if max_len is None else max_len
    return torch.arange(width, device=lengths.device).expand(len(lengths), width) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    parts = []
    if attn_mask is not None:
        parts.append(to_additive_mask(attn_mask, dtype))
    if key_padding_mask is not None:
        parts.append(to_additive_mask(key_padding_mask, dtype).unsqueeze(1).unsqueeze(2))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads:
            raise ValueError("num_heads must be positive and divide d_model")
        self.num_heads, self.d_k, self.dropout = num_heads, d_model // num_heads, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        B, L, _ = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.num_heads, self.d_k)
        q, k, v = torch.einsum("blthd->tbhld", qkv).unbind(0)
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        y, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        y = self.out(torch.einsum("bhld->blhd", y).reshape(B, L, -1))
        if need_weights:
            return y, weights
        return y


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation == "relu":
            self.act = nn.ReLU()
        elif activation == "gelu":
            self.act = nn.GELU()
        else:
            raise ValueError(f"unknown activation {activation}")
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.drop_attn, self.drop_inner, self.drop_ff = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def _sa(self, x, attn_mask, key_padding_mask):
        return self.drop_attn(self.attn(x, attn_mask, key_padding_mask))

    def _ff(self, x):
        return self.drop_ff(self.ff2(self.drop_inner(self.act(self.ff1(x)))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            h = x + self._sa(self.norm1(x), attn_mask, key_padding_mask)
            return h + self._ff(self.norm2(h))
        h = self.norm1(x + self._sa(x, attn_mask, key_padding_mask))
        return self.norm2(h + self._ff(h))
