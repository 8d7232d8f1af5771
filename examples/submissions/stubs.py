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
    # YOUR CODE HERE
    raise NotImplementedError("to_additive_mask is not implemented yet: see 'to_additive_mask' in assignment/README.md")


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    # YOUR CODE HERE
    raise NotImplementedError("scaled_dot_product_attention is not implemented yet: see 'scaled_dot_product_attention' in assignment/README.md")


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    # YOUR CODE HERE
    raise NotImplementedError("split_heads is not implemented yet: see 'split_heads' in assignment/README.md")


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    # YOUR CODE HERE
    raise NotImplementedError("merge_heads is not implemented yet: see 'merge_heads' in assignment/README.md")


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    # YOUR CODE HERE
    raise NotImplementedError("causal_mask is not implemented yet: see 'causal_mask' in assignment/README.md")


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    # YOUR CODE HERE
    raise NotImplementedError("padding_mask is not implemented yet: see 'padding_mask' in assignment/README.md")


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    # YOUR CODE HERE
    raise NotImplementedError("merge_masks is not implemented yet: see 'merge_masks' in assignment/README.md")


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError("MultiHeadSelfAttention.__init__ is not implemented yet: see 'MultiHeadSelfAttention' in assignment/README.md")

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        # YOUR CODE HERE
        raise NotImplementedError("MultiHeadSelfAttention.forward is not implemented yet: see 'MultiHeadSelfAttention' in assignment/README.md")


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError("TransformerBlock.__init__ is not implemented yet: see 'TransformerBlock' in assignment/README.md")

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        # YOUR CODE HERE
        raise NotImplementedError("TransformerBlock.forward is not implemented yet: see 'TransformerBlock' in assignment/README.md")
