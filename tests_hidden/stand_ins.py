"""Correct versions of the contract's building blocks, for error carried forward.

When a part fails its tests, the parts built on it (rubric.toml's `builds_on`) have their failed tests
run again with these in place of the student's own (autograder/record/carry_forward.py): a
MultiHeadSelfAttention that is right given a correct scaled_dot_product_attention keeps its points,
and the attention bug is charged once, in sdpa. Written from torch's primitives (matmul, softmax,
dropout), never a library attention, so that the run-time monitor has nothing to note, and in the
reference's order of random draws, so that dropout tests pass with them as with the reference.

This file is hidden from the worker like the rest of tests_hidden/ and is not in a student's release.
The grader sends a call only the source of the versions it stands in (carry_forward.stand_in_source):
each top-level function or class here is self-contained but for the module's imports and its private
helpers, so a worker never holds a correct version of the part under test.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    blocked = torch.full(mask.shape, float("-inf"), dtype=dtype, device=mask.device)
    return torch.where(mask, blocked, torch.zeros((), dtype=dtype, device=mask.device))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (..., Lq, Lk)
    if attn_mask is not None:
        scores = scores + _additive(attn_mask, scores.dtype)
    weights = scores.softmax(dim=-1)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # the weights returned are the ones applied
    return torch.matmul(weights, v), weights


def split_heads(x, num_heads):
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).permute(0, 2, 1, 3)  # (B, h, L, d_k)


def merge_heads(x):
    batch, heads, length, d_k = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, length, heads * d_k)  # (B, L, d_model)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(seq_len, seq_len, dtype=dtype, device=device).masked_fill(future, float("-inf"))


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    width = int(lengths.max()) if max_len is None else max_len
    return torch.arange(width, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(1)  # (B, max_len)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    merged = None if attn_mask is None else _additive(attn_mask, dtype)
    if key_padding_mask is None:
        return merged
    keys = _additive(key_padding_mask, dtype).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, Lk)
    return keys if merged is None else merged + keys


def _additive(mask, dtype):
    """to_additive_mask for the other stand-ins' own use (a helper: sent with every one of them)."""
    return mask.to(dtype) if mask.dtype != torch.bool else \
        torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))


class MultiHeadSelfAttention(nn.Module):
    """The contract's module, with its parameter names (qkv: [q | k | v], out) and fields."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} must be at least 1 and divide d_model={d_model}")
        self.num_heads, self.d_k, self.dropout = num_heads, d_model // num_heads, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        batch, length, width = x.shape
        heads = self.qkv(x).view(batch, length, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)
        q, k, v = heads.unbind(0)  # 3 x (B, h, L, d_k)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        for mask in (attn_mask, None if key_padding_mask is None else key_padding_mask[:, None, None, :]):
            if mask is not None:
                scores = scores + _additive(mask, scores.dtype)
        weights = scores.softmax(dim=-1)
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, p=self.dropout)
        y = self.out(torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(batch, length, width))
        return (y, weights) if need_weights else y
