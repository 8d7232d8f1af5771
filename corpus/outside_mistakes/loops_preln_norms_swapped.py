"""Multi-head self-attention, view/permute/@ style with small helpers (outside tester's solution B)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG_INF = float("-inf")


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, NEG_INF)
    return mask.to(dtype=dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scale = 1.0 / math.sqrt(q.size(-1))
    scores = (q @ k.transpose(-2, -1)) * scale
    mask = to_additive_mask(attn_mask, scores.dtype)
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(dim=-1)
    if training:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return weights @ v, weights


def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    d_k = d_model // num_heads
    return x.view(batch, length, num_heads, d_k).permute(0, 2, 1, 3)


def merge_heads(x):
    batch, heads, length, d_k = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(batch, length, heads * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    idx = torch.arange(seq_len, device=device)
    future = idx.view(1, -1) > idx.view(-1, 1)   # key j > query i
    return torch.zeros(seq_len, seq_len, dtype=dtype, device=device).masked_fill(future, NEG_INF)


def padding_mask(lengths, max_len=None):
    if isinstance(lengths, torch.Tensor):
        lens = lengths.to(torch.long)
    else:
        lens = torch.as_tensor(list(lengths), dtype=torch.long)
    if max_len is None:
        max_len = int(lens.max().item()) if len(lens) else 0
    cols = torch.arange(max_len, device=lens.device).view(1, max_len)
    return cols >= lens.view(-1, 1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    parts = []
    if attn_mask is not None:
        parts.append(to_additive_mask(attn_mask, dtype))
    if key_padding_mask is not None:
        kpm = to_additive_mask(key_padding_mask, dtype)
        parts.append(kpm.view(kpm.size(0), 1, 1, kpm.size(1)))
    if not parts:
        return None
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1:
            raise ValueError("num_heads must be at least 1")
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.attn_dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def _project(self, x):
        qkv = self.qkv(x)
        d = self.d_model
        q = qkv[..., :d]
        k = qkv[..., d:2 * d]
        v = qkv[..., 2 * d:]
        return (split_heads(q, self.num_heads), split_heads(k, self.num_heads),
                split_heads(v, self.num_heads))

    def _head_mask(self, mask, i):
        if mask is None:
            return None
        while mask.dim() < 4:
            mask = mask.unsqueeze(0)
        return mask[:, i] if mask.size(1) > 1 else mask[:, 0]

    def _attend(self, q, k, v, mask):
        p = self.attn_dropout if self.training else 0.0
        contexts, weights = [], []
        for i in range(self.num_heads):
            c, w = scaled_dot_product_attention(q[:, i], k[:, i], v[:, i], self._head_mask(mask, i),
                                                dropout_p=p, training=self.training)
            contexts.append(c)
            weights.append(w)
        return torch.stack(contexts, dim=1), torch.stack(weights, dim=1)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        q, k, v = self._project(x)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        context, weights = self._attend(q, k, v, mask)
        output = self.out(merge_heads(context))
        return (output, weights) if need_weights else output


class TransformerBlock(nn.Module):
    ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.activation = self.ACTIVATIONS[activation]
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _self_attention(self, x, attn_mask, key_padding_mask):
        y = self.attn(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
        return self.dropout1(y)

    def _feed_forward(self, x):
        h = self.dropout(self.activation(self.ff1(x)))
        return self.dropout2(self.ff2(h))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            x = x + self._self_attention(self.norm2(x), attn_mask, key_padding_mask)
            x = x + self._feed_forward(self.norm1(x))
        else:
            x = self.norm1(x + self._self_attention(x, attn_mask, key_padding_mask))
            x = self.norm2(x + self._feed_forward(x))
        return x
