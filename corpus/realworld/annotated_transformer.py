"""The Annotated Transformer (harvardnlp/annotated-transformer, the_annotated_transformer.py), adapted
to this assignment's contract the way a student who copies it would: `attention()` becomes
scaled_dot_product_attention, `MultiHeadedAttention` keeps its view/transpose idiom behind one `qkv`
projection, `SublayerConnection` and `PositionwiseFeedForward` become the block.

Adapted so that it passes every public test of the suite that existed before the handout's rules were
taught (90/90 from `check`). Handout rules it breaks:
  float16-masking: a boolean mask is filled with -1e9 (`scores.masked_fill(mask == 0, -1e9)` in the
                   original), which does not fit in float16: masked_fill refuses it (section 1.5).
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.to(dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, training=False):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask, -1e9)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    p_attn = scores.softmax(dim=-1)
    if training and dropout_p > 0:
        p_attn = F.dropout(p_attn, p=dropout_p)
    return torch.matmul(p_attn, value), p_attn


def split_heads(x, num_heads):
    nbatches, _, d_model = x.shape
    return x.view(nbatches, -1, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    nbatches, h, _, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(nbatches, -1, h * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    "Mask out subsequent positions."
    attn_shape = (seq_len, seq_len)
    subsequent_mask = torch.triu(torch.ones(attn_shape, device=device), diagonal=1).type(torch.uint8)
    return to_additive_mask(subsequent_mask == 1, dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    if max_len is None:
        max_len = int(lengths.max())
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    mask = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        pad = to_additive_mask(key_padding_mask, dtype).unsqueeze(1).unsqueeze(2)
        mask = pad if mask is None else mask + pad
    return mask


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        "Take in model size and number of heads."
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError("d_model must be a multiple of num_heads")
        # We assume d_v always equals d_k
        self.d_k = d_model // num_heads
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1)]
        # 2) Apply attention on all the projected vectors in batch.
        x, attn = scaled_dot_product_attention(query, key, value, mask, self.dropout, self.training)
        # 3) "Concat" using a view and apply a final linear.
        x = self.out(merge_heads(x))
        return (x, attn) if need_weights else x


class TransformerBlock(nn.Module):
    "Encoder is made up of self-attn and feed forward"

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation}")
        self.activation = activation
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.sublayer_dropout = clones(nn.Dropout(dropout), 2)

    def feed_forward(self, x):
        "Implements FFN equation."
        hidden = self.ff1(x).relu() if self.activation == "relu" else F.gelu(self.ff1(x))
        return self.ff2(self.dropout(hidden))

    def sublayer(self, i, norm, x, sublayer):
        "Apply residual connection to any sublayer with the same size."
        if self.norm_first:
            return x + self.sublayer_dropout[i](sublayer(norm(x)))
        return norm(x + self.sublayer_dropout[i](sublayer(x)))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        x = self.sublayer(0, self.norm1, x, lambda x: self.attn(x, attn_mask, key_padding_mask))
        return self.sublayer(1, self.norm2, x, self.feed_forward)
