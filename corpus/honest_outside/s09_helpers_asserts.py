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


# ----------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------

def _check_rank(t, rank, name):
    assert t.dim() == rank, f"{name}: expected a {rank}-D tensor, got shape {tuple(t.shape)}"


def _is_bool_mask(mask):
    return mask is not None and mask.dtype == torch.bool


def _neg_inf_like(dtype, device):
    return torch.tensor(float("-inf"), dtype=dtype, device=device)


def _scale(d_k):
    assert d_k > 0, "d_k must be positive"
    return 1.0 / math.sqrt(d_k)


def _check_heads(d_model, num_heads):
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    return d_model // num_heads


def _get_activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise ValueError(f"activation must be 'relu' or 'gelu', got {name!r}")


# ----------------------------------------------------------------------------------------------
# the assignment
# ----------------------------------------------------------------------------------------------

def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if _is_bool_mask(mask):
        zero = torch.zeros((), dtype=dtype, device=mask.device)
        result = torch.where(mask, _neg_inf_like(dtype, mask.device), zero)
    else:
        result = mask.to(dtype)
    assert result.shape == mask.shape
    assert result.dtype == dtype
    return result


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    assert q.shape[-1] == k.shape[-1], f"q and k must have the same d_k: {q.shape} vs {k.shape}"
    assert k.shape[-2] == v.shape[-2], f"k and v must have the same Lk: {k.shape} vs {v.shape}"
    Lq, Lk = q.shape[-2], k.shape[-2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * _scale(q.shape[-1])
    assert scores.shape[-2:] == (Lq, Lk)
    mask = to_additive_mask(attn_mask, scores.dtype)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    out = torch.matmul(weights, v)
    assert out.shape[-2:] == (Lq, v.shape[-1])
    return out, weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    _check_rank(x, 3, "split_heads input")
    B, L, d_model = x.shape
    assert d_model % num_heads == 0, f"{num_heads} heads do not divide d_model={d_model}"
    d_k = d_model // num_heads
    y = x.reshape(B, L, num_heads, d_k).transpose(1, 2)
    assert y.shape == (B, num_heads, L, d_k)
    return y


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    _check_rank(x, 4, "merge_heads input")
    B, h, L, d_k = x.shape
    y = x.transpose(1, 2).reshape(B, L, h * d_k)
    assert y.shape == (B, L, h * d_k)
    return y


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    assert seq_len >= 0
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(diagonal=1)
    return to_additive_mask(future, dtype)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if isinstance(lengths, torch.Tensor):
        _check_rank(lengths, 1, "lengths")
        lens = lengths
    else:
        lens = torch.tensor(list(lengths), dtype=torch.long)
    if max_len is None:
        max_len = int(lens.max())
    mask = torch.arange(max_len, device=lens.device).unsqueeze(0) >= lens.unsqueeze(1)
    assert mask.shape == (lens.shape[0], max_len) and mask.dtype == torch.bool
    return mask


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    if attn_mask is None and key_padding_mask is None:
        return None
    merged = None
    if attn_mask is not None:
        assert attn_mask.dim() in (2, 4), f"attn_mask must be 2-D or 4-D, got {tuple(attn_mask.shape)}"
        merged = to_additive_mask(attn_mask, dtype)
        if merged.dim() == 2:
            merged = merged[None, None]  # (1, 1, Lq, Lk)
    if key_padding_mask is not None:
        _check_rank(key_padding_mask, 2, "key_padding_mask")
        kpm = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]  # (B, 1, 1, Lk)
        if merged is not None:
            assert merged.shape[-1] == kpm.shape[-1], "attn_mask and key_padding_mask disagree on Lk"
        merged = kpm if merged is None else merged + kpm
    assert merged.dim() == 4
    return merged


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.d_k = _check_heads(d_model, num_heads)
        self.num_heads = num_heads
        self.d_model = d_model
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def _project(self, x):
        qkv = self.qkv(x)
        d = self.d_model
        return tuple(split_heads(qkv[..., i * d:(i + 1) * d], self.num_heads) for i in range(3))

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        _check_rank(x, 3, "x")
        B, L, D = x.shape
        assert D == self.d_model, f"expected {self.d_model} features, got {D}"
        if key_padding_mask is not None:
            assert key_padding_mask.shape == (B, L), f"key_padding_mask must be {(B, L)}"
        q, k, v = self._project(x)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        ctx, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout,
                                                    training=self.training)
        assert weights.shape == (B, self.num_heads, L, L)
        y = self.out(merge_heads(ctx))
        assert y.shape == x.shape
        return (y, weights) if need_weights else y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        self._act = _get_activation(activation)
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _sa_block(self, x, attn_mask, key_padding_mask):
        return self.dropout1(self.attn(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

    def _ff_block(self, x):
        return self.dropout2(self.ff2(self.dropout(self._act(self.ff1(x)))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        _check_rank(x, 3, "x")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), attn_mask, key_padding_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, attn_mask, key_padding_mask))
            x = self.norm2(x + self._ff_block(x))
        return x
