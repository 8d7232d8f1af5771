"""A valid solution written with Python loops where others use tensor algebra: the scores one query at a
time and the output one key at a time, a hand-written stable softmax, heads sliced one by one, masks
filled row by row, and a block that names every intermediate instead of reusing x."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill(mask, -math.inf)


def _softmax(scores):
    largest = scores.amax(dim=-1, keepdim=True)
    exps = torch.exp(scores - largest)
    return exps / exps.sum(dim=-1, keepdim=True)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scale = 1.0 / math.sqrt(q.shape[-1])
    rows = []
    for i in range(q.shape[-2]):
        query = q[..., i:i + 1, :]
        rows.append((query * k).sum(dim=-1) * scale)
    scores = torch.stack(rows, dim=-2)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = _softmax(scores)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights[..., 0:1] * v[..., 0:1, :]
    for j in range(1, k.shape[-2]):
        out = out + weights[..., j:j + 1] * v[..., j:j + 1, :]
    return out, weights


def split_heads(x, num_heads):
    d_k = x.shape[-1] // num_heads
    heads = []
    for i in range(num_heads):
        heads.append(x[:, :, i * d_k:(i + 1) * d_k])
    return torch.stack(heads, dim=1)


def merge_heads(x):
    heads = []
    for i in range(x.shape[1]):
        heads.append(x[:, i])
    return torch.cat(heads, dim=-1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    mask = torch.zeros(seq_len, seq_len, dtype=dtype, device=device)
    for i in range(seq_len):
        mask[i, i + 1:] = float("-inf")
    return mask


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    width = int(lengths.max()) if max_len is None else max_len
    rows = []
    for n in lengths:
        rows.append(torch.arange(width, device=lengths.device) >= n)
    return torch.stack(rows)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    merged = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is None:
        return merged
    keys = to_additive_mask(key_padding_mask, dtype)
    keys = keys.reshape(keys.shape[0], 1, 1, keys.shape[1])
    if merged is None:
        return keys
    return merged + keys


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        projected = self.qkv(x)
        d_model = x.shape[-1]
        heads = []
        for n in range(3):
            heads.append(split_heads(projected[..., n * d_model:(n + 1) * d_model], self.num_heads))
        q, k, v = heads
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        attended, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        y = self.out(merge_heads(attended))
        if need_weights:
            return y, weights
        return y


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation == "relu":
            self.activation = F.relu
        elif activation == "gelu":
            self.activation = F.gelu
        else:
            raise ValueError(f"unknown activation {activation!r}")
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.drop_attn = nn.Dropout(dropout)
        self.drop_hidden = nn.Dropout(dropout)
        self.drop_ff = nn.Dropout(dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            attended = x + self.drop_attn(self.attn(self.norm1(x), attn_mask, key_padding_mask))
            hidden = self.drop_hidden(self.activation(self.ff1(self.norm2(attended))))
            return attended + self.drop_ff(self.ff2(hidden))
        attended = self.norm1(x + self.drop_attn(self.attn(x, attn_mask, key_padding_mask)))
        hidden = self.drop_hidden(self.activation(self.ff1(attended)))
        return self.norm2(attended + self.drop_ff(self.ff2(hidden)))
