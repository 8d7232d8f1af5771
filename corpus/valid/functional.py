"""A valid solution in functional style: F.linear, F.layer_norm and F.dropout with the modules'
weights, and masks handled as booleans (an additive mask is 0.0 or -inf, so -inf means blocked)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _blocked(mask):
    return mask if mask.dtype == torch.bool else torch.isneginf(mask)


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.is_floating_point():
        return mask.to(dtype)
    return torch.zeros_like(mask, dtype=dtype).masked_fill_(mask, -math.inf)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scores = torch.matmul(q, k.transpose(-1, -2)).div(math.sqrt(k.size(-1)))
    if attn_mask is not None:
        scores = scores.masked_fill(_blocked(attn_mask), -math.inf)
    weights = F.dropout(F.softmax(scores, dim=-1), dropout_p, training)
    return torch.matmul(weights, v), weights


def split_heads(x, num_heads):
    B, L, _ = x.shape
    return x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)


def merge_heads(x):
    B, _, L, _ = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, L, -1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    return to_additive_mask(torch.triu(torch.ones(seq_len, seq_len, device=device, dtype=torch.bool), 1), dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    steps = torch.arange(int(lengths.max()) if max_len is None else int(max_len), device=lengths.device)
    return steps.unsqueeze(0).ge(lengths.unsqueeze(1))


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    if attn_mask is None and key_padding_mask is None:
        return None
    blocked = torch.zeros((), dtype=torch.bool)
    if attn_mask is not None:
        blocked = blocked.to(attn_mask.device) | _blocked(attn_mask)
    if key_padding_mask is not None:
        blocked = blocked.to(key_padding_mask.device) | _blocked(key_padding_mask)[:, None, None, :]
    return to_additive_mask(blocked, dtype)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if isinstance(num_heads, int) and num_heads > 0 and d_model % num_heads == 0:
            self.num_heads = num_heads
        else:
            raise ValueError("bad num_heads")
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        qkv = F.linear(x, self.qkv.weight, self.qkv.bias)
        q, k, v = (split_heads(t, self.num_heads) for t in qkv.tensor_split(3, dim=-1))
        y, weights = scaled_dot_product_attention(q, k, v, merge_masks(attn_mask, key_padding_mask, x.dtype),
                                                  self.dropout, self.training)
        y = F.linear(merge_heads(y), self.out.weight, self.out.bias)
        return (y, weights) if need_weights else y


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation == "relu":
            self.activation = F.relu
        elif activation == "gelu":
            self.activation = F.gelu
        else:
            raise ValueError(activation)
        self.norm_first, self.dropout = norm_first, dropout
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def _ln(self, norm, x):
        return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, norm.eps)

    def _sa(self, x, attn_mask, key_padding_mask):
        return F.dropout(self.attn(x, attn_mask, key_padding_mask), self.dropout, self.training)

    def _ff(self, x):
        hidden = F.dropout(self.activation(F.linear(x, self.ff1.weight, self.ff1.bias)), self.dropout, self.training)
        return F.dropout(F.linear(hidden, self.ff2.weight, self.ff2.bias), self.dropout, self.training)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            x = x + self._sa(self._ln(self.norm1, x), attn_mask, key_padding_mask)
            return x + self._ff(self._ln(self.norm2, x))
        x = self._ln(self.norm1, x + self._sa(x, attn_mask, key_padding_mask))
        return self._ln(self.norm2, x + self._ff(x))
