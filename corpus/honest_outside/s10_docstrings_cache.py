"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.

Implementation notes
--------------------
* Causal masks are cached per (seq_len, device, dtype) in ``_CAUSAL_CACHE``, since a model asks for the
  same one at every layer and every step.
* The activations of the feed-forward network come from the table ``ACTIVATIONS``.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

#: value of a blocked entry in an additive mask
NEG_INF = float("-inf")

#: activations allowed in TransformerBlock; "gelu" is the exact (erf) GELU
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
}

#: (seq_len, device, dtype) -> additive causal mask
_CAUSAL_CACHE = {}
_CAUSAL_CACHE_MAX = 32


def to_additive_mask(mask, dtype):
    """Convert a mask to the additive form.

    Args:
        mask: ``None``, a boolean mask (``True`` = blocked) or an additive float mask.
        dtype: the floating dtype of the result.

    Returns:
        ``None`` for ``None``; otherwise a tensor of the mask's shape and device, ``-inf`` where the
        mask blocks and ``0.0`` where it allows (a float mask is only cast to ``dtype``).
    """
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, NEG_INF)
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.

    Args:
        q: queries ``(..., Lq, d_k)``.
        k: keys ``(..., Lk, d_k)``.
        v: values ``(..., Lk, d_v)``.
        attn_mask: ``None``, boolean (``True`` = blocked) or additive float mask, broadcastable
            to ``(..., Lq, Lk)``.
        dropout_p: dropout probability on the attention weights.
        training: apply dropout only when true.

    Returns:
        ``(out, weights)`` with ``out`` of shape ``(..., Lq, d_v)`` and ``weights`` of shape
        ``(..., Lq, Lk)`` (after dropout, i.e. the weights actually multiplied with ``v``).
    """
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    additive = to_additive_mask(attn_mask, scores.dtype)
    if additive is not None:
        scores = scores + additive
    weights = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return torch.matmul(weights, v), weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k.

    Args:
        x: a tensor ``(B, L, d_model)``.
        num_heads: ``h``, which must divide ``d_model``.

    Returns:
        A view ``(B, h, L, d_k)`` of ``x`` with ``out[b, i, l] == x[b, l, i*d_k:(i+1)*d_k]``.
    """
    B, L, d_model = x.shape
    return x.reshape(B, L, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads.

    Args:
        x: a tensor ``(B, h, L, d_k)``, possibly non-contiguous.

    Returns:
        ``(B, L, h*d_k)``, the heads side by side, head 0 first.
    """
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, h * d_k)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere.

    Args:
        seq_len: ``L``.
        device: a ``torch.device``, a string such as ``"cpu"``, or ``None`` (the default device).
        dtype: the floating dtype of the mask.

    Returns:
        ``(L, L)`` tensor, ``0.0`` where key ``j <= i`` (query ``i``), ``-inf`` where ``j > i``.
        The tensor comes from a small cache: do not modify it in place.
    """
    key = (int(seq_len), str(torch.device(device)) if device is not None else None, dtype)
    mask = _CAUSAL_CACHE.get(key)
    if mask is None:
        mask = torch.full((seq_len, seq_len), NEG_INF, dtype=dtype, device=device).triu(diagonal=1)
        if len(_CAUSAL_CACHE) >= _CAUSAL_CACHE_MAX:
            _CAUSAL_CACHE.clear()
        _CAUSAL_CACHE[key] = mask
    return mask


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths).

    Args:
        lengths: the true length of each sequence, a list of ints or a 1-D integer tensor (the mask is
            then on its device).
        max_len: the padded length; ``max(lengths)`` when ``None``.

    Returns:
        A boolean ``(B, max_len)`` tensor, ``True`` at the padded positions.
    """
    if isinstance(lengths, torch.Tensor):
        lengths_t = lengths
    else:
        lengths_t = torch.as_tensor(lengths, dtype=torch.long)
    if max_len is None:
        max_len = int(lengths_t.max())
    positions = torch.arange(max_len, device=lengths_t.device)
    return positions[None, :] >= lengths_t[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.

    Args:
        attn_mask: ``None``, ``(Lq, Lk)``, ``(B, 1, Lq, Lk)`` or ``(B, h, Lq, Lk)``, boolean or additive.
        key_padding_mask: ``None`` or ``(B, Lk)``, boolean or additive; it blocks keys.
        dtype: the dtype of the result.

    Returns:
        ``None`` when both masks are ``None``, otherwise the sum of the two additive masks, the key
        padding mask reshaped to ``(B, 1, 1, Lk)``.
    """
    attn = to_additive_mask(attn_mask, dtype)
    keys = to_additive_mask(key_padding_mask, dtype)
    if keys is not None:
        keys = keys.reshape(keys.shape[0], 1, 1, keys.shape[-1])
    if attn is None:
        return keys
    if keys is None:
        return attn
    return attn + keys


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them.

    Args:
        d_model: number of features of each token.
        num_heads: number of heads ``h``; must be at least 1 and divide ``d_model``.
        dropout: dropout probability of the attention weights (training mode only).
        bias: whether ``qkv`` and ``out`` have biases.

    Attributes:
        num_heads (int): ``h``.
        d_k (int): features per head, ``d_model // h``.
        qkv (nn.Linear): ``d_model -> 3*d_model``, output ``[Q | K | V]``.
        out (nn.Linear): ``d_model -> d_model``, the output projection ``W^O``.
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got {num_heads}")
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads ({num_heads}) must divide d_model ({d_model})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights.

        Args:
            x: ``(B, L, d_model)``.
            attn_mask: ``None``, ``(L, L)``, ``(B, 1, L, L)`` or ``(B, h, L, L)``; boolean or additive.
            key_padding_mask: ``None`` or ``(B, L)``; boolean or additive.
            need_weights: also return the per-head attention weights ``(B, h, L, L)``.
        """
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = split_heads(q, self.num_heads)
        k = split_heads(k, self.num_heads)
        v = split_heads(v, self.num_heads)
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        heads, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        y = self.out(merge_heads(heads))
        if need_weights:
            return y, weights
        return y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm.

    Args:
        d_model: number of features.
        num_heads: number of attention heads.
        d_ff: hidden width of the feed-forward network.
        dropout: dropout probability (attention weights, after attention, inside and after the FFN).
        activation: ``"relu"`` or ``"gelu"`` (see ``ACTIVATIONS``).
        norm_first: pre-LN when true, post-LN (the original Transformer) when false.
        layer_norm_eps: ``eps`` of both LayerNorms.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _sa(self, x, attn_mask, key_padding_mask):
        """Self-attention sub-layer, with its output dropout."""
        return self.dropout1(self.attn(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

    def _ff(self, x):
        """Feed-forward sub-layer: ff1, activation, dropout, ff2, dropout."""
        act = ACTIVATIONS[self.activation]
        return self.dropout2(self.ff2(self.dropout(act(self.ff1(x)))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN).

        The masks are passed on to ``attn`` unchanged.
        """
        if self.norm_first:
            x = x + self._sa(self.norm1(x), attn_mask, key_padding_mask)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, attn_mask, key_padding_mask))
            x = self.norm2(x + self._ff(x))
        return x
