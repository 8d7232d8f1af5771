"""A valid solution that writes the numerics out: a max-subtracted softmax, dropout from
torch.rand_like, GELU from erf, and LayerNorm by hand with the module's parameters."""
import math

import torch
import torch.nn as nn


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype is torch.bool:
        return torch.where(mask, float("-inf"), 0.0).to(dtype)
    return mask.to(dtype=dtype)


def _softmax(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=-1, keepdim=True)


def _dropout(x, p):
    keep = torch.rand_like(x) >= p
    return x * keep / (1.0 - p)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-1, -2)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = _softmax(scores)
    if training and dropout_p > 0:
        weights = _dropout(weights, dropout_p)
    return weights @ v, weights


def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def merge_heads(x):
    B, H, L, Dk = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dk)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    i = torch.arange(seq_len, device=device)
    return torch.where(i.unsqueeze(1) < i.unsqueeze(0), float("-inf"), 0.0).to(device=device, dtype=dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths).long()
    if max_len is None:
        max_len = lengths.max().item()
    return torch.arange(max_len, device=lengths.device)[None] >= lengths[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    merged = None
    if attn_mask is not None:
        merged = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        keys = to_additive_mask(key_padding_mask, dtype)
        keys = keys.reshape(keys.shape[0], 1, 1, keys.shape[1])
        merged = keys if merged is None else merged + keys
    return merged


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1:
            raise ValueError("need at least one head")
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        d_model = x.shape[-1]
        qkv = self.qkv(x)
        q = split_heads(qkv[..., :d_model], self.num_heads)
        k = split_heads(qkv[..., d_model:2 * d_model], self.num_heads)
        v = split_heads(qkv[..., 2 * d_model:], self.num_heads)
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        y, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout,
                                            training=self.training)
        y = self.out(merge_heads(y))
        if need_weights:
            return y, w
        return y


def _gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _layer_norm(norm, x):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        acts = {"relu": torch.relu, "gelu": _gelu}
        if activation not in acts:
            raise ValueError(f"activation {activation!r} is not supported")
        self.act = acts[activation]
        self.norm_first = norm_first
        self.p = dropout
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout=dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def _drop(self, x):
        return _dropout(x, self.p) if self.training and self.p > 0 else x

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            x = x + self._drop(self.attn(_layer_norm(self.norm1, x), attn_mask, key_padding_mask))
            x = x + self._drop(self.ff2(self._drop(self.act(self.ff1(_layer_norm(self.norm2, x))))))
            return x
        x = _layer_norm(self.norm1, x + self._drop(self.attn(x, attn_mask, key_padding_mask)))
        return _layer_norm(self.norm2, x + self._drop(self.ff2(self._drop(self.act(self.ff1(x))))))
