"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.
"""
from __future__ import annotations

import math
from typing import Callable, Final, List, Literal, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

Mask = Optional[Tensor]
Lengths = Union[Sequence[int], Tensor]
DeviceLike = Union[torch.device, str, None]
Activation = Literal["relu", "gelu"]

NEG_INF: Final[float] = float("-inf")


# NOTE: these were @dataclass classes at first, but then the tests could not even import the file:
#   "AttributeError: 'NoneType' object has no attribute '__dict__'" (dataclasses + `from __future__
#   import annotations` when the file is loaded from a path). Typed NamedTuples do the same job.
class HeadConfig(NamedTuple):
    """Shape bookkeeping of a multi-head attention layer."""

    d_model: int
    num_heads: int
    d_k: int

    @classmethod
    def build(cls, d_model: int, num_heads: int) -> HeadConfig:
        if num_heads < 1:
            raise ValueError(f"num_heads must be at least 1, got {num_heads}")
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        return cls(d_model=d_model, num_heads=num_heads, d_k=d_model // num_heads)


class AttentionOutput(NamedTuple):
    output: Tensor
    weights: Tensor

    def as_tuple(self) -> Tuple[Tensor, Tensor]:
        return self.output, self.weights


def to_additive_mask(mask: Mask, dtype: torch.dtype) -> Optional[Tensor]:
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype is torch.bool:
        return torch.where(mask,
                           torch.full((), NEG_INF, dtype=dtype, device=mask.device),
                           torch.zeros((), dtype=dtype, device=mask.device))
    return mask.to(dtype=dtype)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Mask = None,
                                 dropout_p: float = 0.0, training: bool = False) -> Tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    d_k: int = q.shape[-1]
    scale: float = 1.0 / math.sqrt(d_k)
    scores: Tensor = (q @ k.transpose(-2, -1)) * scale
    additive: Optional[Tensor] = to_additive_mask(attn_mask, scores.dtype)
    if additive is not None:
        scores = scores + additive
    weights: Tensor = torch.softmax(scores, dim=-1)
    if training and dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    result = AttentionOutput(output=weights @ v, weights=weights)
    return result.as_tuple()


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    batch, length, d_model = x.shape
    d_k: int = d_model // num_heads
    return x.view(batch, length, num_heads, d_k).permute(0, 2, 1, 3)


def merge_heads(x: Tensor) -> Tensor:
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    batch, heads, length, d_k = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, length, heads * d_k)


def causal_mask(seq_len: int, device: DeviceLike = None, dtype: torch.dtype = torch.float32) -> Tensor:
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    blocked: Tensor = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(diagonal=1)
    mask = to_additive_mask(blocked, dtype)
    assert mask is not None
    return mask


def padding_mask(lengths: Lengths, max_len: Optional[int] = None) -> Tensor:
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    lens: Tensor = lengths if isinstance(lengths, Tensor) else torch.as_tensor(list(lengths), dtype=torch.long)
    n: int = int(lens.max()) if max_len is None else int(max_len)
    idx: Tensor = torch.arange(n, device=lens.device)
    return idx[None, :] >= lens[:, None]


def merge_masks(attn_mask: Mask, key_padding_mask: Mask, dtype: torch.dtype = torch.float32) -> Optional[Tensor]:
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    parts: List[Tensor] = []
    if attn_mask is not None:
        am = to_additive_mask(attn_mask, dtype)
        assert am is not None
        if am.dim() == 2:
            am = am.view(1, 1, *am.shape)
        parts.append(am)
    if key_padding_mask is not None:
        kpm = to_additive_mask(key_padding_mask, dtype)
        assert kpm is not None
        parts.append(kpm.view(kpm.shape[0], 1, 1, kpm.shape[1]))
    if not parts:
        return None
    total: Tensor = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    num_heads: int
    d_k: int
    dropout: float

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        cfg = HeadConfig.build(d_model, num_heads)
        self.cfg: HeadConfig = cfg
        self.num_heads = cfg.num_heads
        self.d_k = cfg.d_k
        self.dropout = float(dropout)
        self.qkv: nn.Linear = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out: nn.Linear = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, attn_mask: Mask = None, key_padding_mask: Mask = None,
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        d_model: int = self.cfg.d_model
        projected: Tensor = self.qkv(x)
        q, k, v = (split_heads(projected[..., i * d_model:(i + 1) * d_model], self.num_heads)
                   for i in range(3))
        mask: Optional[Tensor] = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        heads, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                      dropout_p=self.dropout, training=self.training)
        y: Tensor = self.out(merge_heads(heads))
        return (y, weights) if need_weights else y


_ACTIVATIONS: Final[dict[str, Callable[[Tensor], Tensor]]] = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact (erf) GELU is the default of F.gelu
}


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 activation: Activation = "relu", norm_first: bool = False,
                 layer_norm_eps: float = 1e-5) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; expected 'relu' or 'gelu'")
        self.act_name: str = activation
        self.norm_first: bool = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _sa_block(self, x: Tensor, attn_mask: Mask, key_padding_mask: Mask) -> Tensor:
        y = self.attn(x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)
        assert isinstance(y, Tensor)
        return self.dropout1(y)

    def _ff_block(self, x: Tensor) -> Tensor:
        act = _ACTIVATIONS[self.act_name]
        return self.dropout2(self.ff2(self.dropout(act(self.ff1(x)))))

    def forward(self, x: Tensor, attn_mask: Mask = None, key_padding_mask: Mask = None) -> Tensor:
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), attn_mask, key_padding_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, attn_mask, key_padding_mask))
            x = self.norm2(x + self._ff_block(x))
        return x
