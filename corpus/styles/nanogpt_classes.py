"""A valid solution in the class-heavy style of nanoGPT's manual attention path: the masks are a small
class, self-attention does its own attention inline with view/transpose and masked_fill (it does not
call scaled_dot_product_attention), and the block is built from sub-layer objects."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class _Masks:
    """Additive masks from boolean ones; -inf marks a blocked position."""

    NEG = float("-inf")

    @classmethod
    def additive(cls, mask, dtype):
        if mask is None:
            return None
        if mask.dtype != torch.bool:
            return mask.to(dtype)
        out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        return out.masked_fill(mask, cls.NEG)

    @staticmethod
    def blocked(mask):
        return mask if mask.dtype == torch.bool else mask == float("-inf")


def to_additive_mask(mask, dtype):
    return _Masks.additive(mask, dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if attn_mask is not None:
        att = att.masked_fill(_Masks.blocked(attn_mask), float("-inf"))
    att = F.softmax(att, dim=-1)
    att = F.dropout(att, p=dropout_p, training=training)
    return att @ v, att


def split_heads(x, num_heads):
    B, T, C = x.size()
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2)


def merge_heads(x):
    B, nh, T, hs = x.size()
    return x.transpose(1, 2).contiguous().view(B, T, nh * hs)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    tril = torch.tril(torch.ones(seq_len, seq_len, device=device))
    return torch.zeros(seq_len, seq_len, dtype=dtype, device=device).masked_fill(tril == 0, float("-inf"))


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    T = max_len if max_len is not None else int(lengths.max().item())
    return torch.arange(T, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    mask = _Masks.additive(attn_mask, dtype)
    if key_padding_mask is None:
        return mask
    pad = _Masks.additive(key_padding_mask, dtype).unsqueeze(1).unsqueeze(2)
    return pad if mask is None else mask + pad


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads:
            raise ValueError("num_heads must be positive and divide d_model")
        self.n_head, self.n_embd = num_heads, d_model
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if attn_mask is not None:
            att = att.masked_fill(_Masks.blocked(attn_mask), float("-inf"))
        if key_padding_mask is not None:
            att = att.masked_fill(_Masks.blocked(key_padding_mask)[:, None, None, :], float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.out(y)
        return (y, att) if need_weights else y


class _FeedForward(nn.Module):
    """The activation and the dropout between ff1 and ff2 (the block owns the two linear layers)."""

    def __init__(self, activation, dropout):
        super().__init__()
        self.activation = activation
        self.drop = nn.Dropout(dropout)

    def forward(self, x, ff1, ff2):
        return ff2(self.drop(self.activation(ff1(x))))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation}")
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.resid_dropout = nn.Dropout(dropout)
        act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.mlp = _FeedForward(act, dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            x = x + self.resid_dropout(self.attn(self.norm1(x), attn_mask, key_padding_mask))
            x = x + self.resid_dropout(self.mlp(self.norm2(x), self.ff1, self.ff2))
        else:
            x = self.norm1(x + self.resid_dropout(self.attn(x, attn_mask, key_padding_mask)))
            x = self.norm2(x + self.resid_dropout(self.mlp(x, self.ff1, self.ff2)))
        return x
