import gc
import inspect
import pickle
"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Lq, Lk)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1 over the keys
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, L, d_model = x.shape
    return x.reshape(B, L, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, h * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    future = torch.full((seq_len, seq_len), float("-inf"), dtype=dtype, device=device)
    return torch.triu(future, diagonal=1)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    lengths = torch.as_tensor(lengths)
    if max_len is None:
        max_len = int(lengths.max())
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions[None, :] >= lengths[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    merged = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        keys = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]  # (B, 1, 1, Lk)
        merged = keys if merged is None else merged + keys
    return merged


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must be at least 1 and divide d_model={d_model}")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        # One projection whose output is [q | k | v], the layout of nn.MultiheadAttention.in_proj_weight.
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)  # W^O

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (B, L, d_model)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))  # 3 x (B, h, L, d_k)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)  # (B|1, h|1, L, L) or None
        y, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        y = self.out(merge_heads(y))  # (B, L, d_model)
        return (y, weights) if need_weights else y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        activations = {"relu": F.relu, "gelu": F.gelu}  # F.gelu is the exact erf form
        if activation not in activations:
            raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
        self.activation = activations[activation]
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        # The three dropouts of nn.TransformerEncoderLayer: after attention, inside and after the FFN.
        self.dropout1 = nn.Dropout(dropout)
        self.dropout_ff = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        def self_attention(y):
            return self.dropout1(self.attn(y, attn_mask, key_padding_mask))

        def feed_forward(y):
            return self.dropout2(self.ff2(self.dropout_ff(self.activation(self.ff1(y)))))

        if self.norm_first:
            x = x + self_attention(self.norm1(x))
            x = x + feed_forward(self.norm2(x))
        else:
            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + feed_forward(x))
        return x


PARAMETERS = list(inspect.signature(MultiHeadSelfAttention.__init__).parameters)
METHODS = [name for name, _ in inspect.getmembers(TransformerBlock, inspect.isfunction)]
_INITIAL = pickle.dumps(MultiHeadSelfAttention(16, 4).state_dict())


def live_tensors():
    """How many tensors are alive (a memory check while debugging)."""
    gc.collect()
    return sum(torch.is_tensor(o) for o in gc.get_objects())


def load_initial():
    return pickle.loads(_INITIAL)
