"""A valid solution that projects q, k and v separately with F.linear on slices of the qkv weights,
and masks bool masks with masked_fill instead of adding an additive mask."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG_INF = float("-inf")


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        out = torch.zeros_like(mask, dtype=dtype)
        return out.masked_fill(mask, NEG_INF)
    return mask.type(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    d_k = q.size(-1)
    scores = torch.matmul(q, k.mT) / math.sqrt(d_k)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(attn_mask, NEG_INF)
    elif attn_mask is not None:
        scores = scores + attn_mask.to(scores.dtype)
    weights = F.softmax(scores, dim=-1)
    if training:
        weights = F.dropout(weights, dropout_p, True)
    return torch.matmul(weights, v), weights


def split_heads(x, num_heads):
    batch, length, width = x.size()
    return x.reshape(batch, length, num_heads, width // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    batch, heads, length, d_k = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(batch, length, heads * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    rows = torch.arange(seq_len, device=device)
    mask = torch.zeros((seq_len, seq_len), dtype=dtype, device=device)
    return mask.masked_fill(rows[None, :] > rows[:, None], NEG_INF)


def padding_mask(lengths, max_len=None):
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(list(lengths))
    if max_len is None:
        max_len = int(lengths.max().item())
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(-1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    if attn_mask is None and key_padding_mask is None:
        return None
    if key_padding_mask is None:
        return to_additive_mask(attn_mask, dtype)
    keys = to_additive_mask(key_padding_mask, dtype).view(key_padding_mask.shape[0], 1, 1, -1)
    if attn_mask is None:
        return keys
    return to_additive_mask(attn_mask, dtype) + keys


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if not (num_heads >= 1 and d_model % num_heads == 0):
            raise ValueError(f"cannot split d_model={d_model} into {num_heads} heads")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def _project(self, x, i):
        rows = slice(i * self.d_model, (i + 1) * self.d_model)
        bias = None if self.qkv.bias is None else self.qkv.bias[rows]
        return split_heads(F.linear(x, self.qkv.weight[rows], bias), self.num_heads)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        q, k, v = (self._project(x, i) for i in range(3))
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        context, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout,
                                                        training=self.training)
        out = F.linear(merge_heads(context), self.out.weight, self.out.bias)
        return (out, weights) if need_weights else out


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)
        self.activation = getattr(F, activation)
        self.norm_first = norm_first
        self.p = dropout
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def _drop(self, x):
        return F.dropout(x, self.p, self.training)

    def _norm(self, norm, x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        def attend(y):
            return self._drop(self.attn(y, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

        def feed(y):
            return self._drop(self.ff2(self._drop(self.activation(self.ff1(y)))))

        if self.norm_first:
            x = x + attend(self._norm(self.norm1, x))
            return x + feed(self._norm(self.norm2, x))
        x = self._norm(self.norm1, x + attend(x))
        return self._norm(self.norm2, x + feed(x))
