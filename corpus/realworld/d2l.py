"""Dive into Deep Learning (d2l-ai/d2l-en, chapter "Attention Mechanisms and Transformers":
masked_softmax, DotProductAttention, MultiHeadAttention with transpose_qkv / transpose_output,
PositionWiseFFN, AddNorm, TransformerEncoderBlock), adapted to this assignment's contract the way a
student who copies it would: masked_softmax takes the boolean mask instead of valid lengths, one `qkv`
projection replaces W_q, W_k, W_v, and the block gains the pre-LN order d2l does not have.

Adapted so that it passes every public test of the suite that existed before the handout's rules were
taught (90/90 from `check`). Handout rules it breaks:
  feed-forward-dropout: PositionWiseFFN is dense2(relu(dense1(X))) with no dropout between the
                        activation and ff2; AddNorm's dropout is the only one (sections 1.6 and 3).
Its -1e6 fill is written by index assignment, which rounds to -inf in float16 instead of failing, so
float16 masking holds here by luck (the rule still applies: section 1.5).
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    return mask.to(dtype)


def masked_softmax(X, blocked):
    """Perform softmax operation by masking elements on the last axis."""
    if blocked is None:
        return nn.functional.softmax(X, dim=-1)
    # On the last axis, replace masked elements with a very large negative
    # value, whose exponentiation outputs 0
    X = X.clone()
    X[blocked.expand_as(X)] = -1e6
    return nn.functional.softmax(X, dim=-1)


def scaled_dot_product_attention(queries, keys, values, attn_mask=None, dropout_p=0.0, training=False):
    """Scaled dot product attention."""
    d = queries.shape[-1]
    # Swap the last two dimensions of keys with keys.transpose(-2, -1)
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask.to(scores.dtype)
        attn_mask = None
    attention_weights = masked_softmax(scores, attn_mask)
    attention_weights = F.dropout(attention_weights, dropout_p, training)
    return torch.matmul(attention_weights, values), attention_weights


def split_heads(X, num_heads):
    """Transposition for parallel computation of multiple attention heads."""
    # Shape of input X: (batch_size, no. of queries or key-value pairs, num_hiddens).
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    # Shape of output X: (batch_size, num_heads, no. of queries or key-value pairs,
    # num_hiddens / num_heads)
    return X.permute(0, 2, 1, 3)


def merge_heads(X):
    """Reverse the operation of split_heads."""
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    dec_valid_lens = torch.arange(1, seq_len + 1, device=device)
    return to_additive_mask(padding_mask(dec_valid_lens, seq_len), dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    maxlen = int(lengths.max()) if max_len is None else max_len
    mask = torch.arange((maxlen), dtype=torch.float32, device=lengths.device)[None, :] < lengths[:, None]
    return ~mask


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    merged = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        keys = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]
        merged = keys if merged is None else merged + keys
    return merged


class MultiHeadSelfAttention(nn.Module):
    """Multi-head attention."""
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, X, attn_mask=None, key_padding_mask=None, need_weights=False):
        # Shape of queries, keys, or values: (batch_size, num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        queries, keys, values = (split_heads(t, self.num_heads) for t in self.qkv(X).chunk(3, dim=-1))
        mask = merge_masks(attn_mask, key_padding_mask, X.dtype)
        output, weights = scaled_dot_product_attention(queries, keys, values, mask, self.dropout,
                                                       self.training)
        output_concat = merge_heads(output)
        Y = self.out(output_concat)
        return (Y, weights) if need_weights else Y


class TransformerBlock(nn.Module):
    """The Transformer encoder block."""
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        # PositionWiseFFN
        self.ff1 = nn.Linear(d_model, d_ff)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.ff2 = nn.Linear(d_ff, d_model)
        # AddNorm
        self.dropout = nn.Dropout(dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm_first = norm_first

    def ffn(self, X):
        return self.ff2(self.act(self.ff1(X)))

    def forward(self, X, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            X = X + self.dropout(self.attn(self.norm1(X), attn_mask, key_padding_mask))
            return X + self.dropout(self.ffn(self.norm2(X)))
        Y = self.norm1(X + self.dropout(self.attn(X, attn_mask, key_padding_mask)))
        return self.norm2(Y + self.dropout(self.ffn(Y)))
