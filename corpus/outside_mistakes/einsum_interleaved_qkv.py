"""Multi-head self-attention, einsum style (outside tester's solution A)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        blocked = torch.full(mask.shape, float("-inf"), dtype=dtype, device=mask.device)
        allowed = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return torch.where(mask, blocked, allowed)
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    d_k = q.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = torch.einsum("...qk,...kd->...qd", weights, v)
    return out, weights


def split_heads(x, num_heads):
    # (B, L, h*d_k) -> (B, L, h, d_k) -> (B, h, L, d_k)
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def merge_heads(x):
    # (B, h, L, d_k) -> (B, L, h, d_k) -> (B, L, h*d_k)
    return x.transpose(1, 2).flatten(-2)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    full = torch.full((seq_len, seq_len), float("-inf"), dtype=dtype, device=device)
    return torch.triu(full, diagonal=1)


def padding_mask(lengths, max_len=None):
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(lengths, dtype=torch.long)
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() > 0 else 0
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    if attn_mask is None and key_padding_mask is None:
        return None
    merged = None
    if attn_mask is not None:
        merged = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        kpm = to_additive_mask(key_padding_mask, dtype).unflatten(-1, (1, 1, -1))  # (B, 1, 1, Lk)
        merged = kpm if merged is None else merged + kpm
    return merged


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must be >= 1 and divide d_model={d_model}")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        qkv = self.qkv(x).unflatten(-1, (self.num_heads, 3 * self.d_k))  # (B, L, h, 3*d_k)
        q, k, v = qkv.transpose(1, 2).chunk(3, dim=-1)  # each (B, h, L, d_k)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        ctx, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        y = self.out(merge_heads(ctx))
        if need_weights:
            return y, weights
        return y


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation == "relu":
            self.act = F.relu
        elif activation == "gelu":
            self.act = F.gelu
        else:
            raise ValueError(f"unknown activation {activation!r}")
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.drop_attn = nn.Dropout(dropout)
        self.drop_ff = nn.Dropout(dropout)
        self.drop_out = nn.Dropout(dropout)

    def _sa(self, x, attn_mask, key_padding_mask):
        return self.drop_attn(self.attn(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

    def _ff(self, x):
        return self.drop_out(self.ff2(self.drop_ff(self.act(self.ff1(x)))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            x = x + self._sa(self.norm1(x), attn_mask, key_padding_mask)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, attn_mask, key_padding_mask))
            x = self.norm2(x + self._ff(x))
        return x
