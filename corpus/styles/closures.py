"""A valid solution in a functional-closure style: small higher-order helpers build the pieces
(a scorer, a masker, a normaliser), and the modules compose them; einsum for every product."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def _compose(*fns):
    def composed(x):
        for f in fns:
            x = f(x)
        return x
    return composed


def _scorer(scale):
    return lambda q, k: torch.einsum("...qd,...kd->...qk", q, k) * scale


def _masker(mask):
    if mask is None:
        return lambda s: s
    return lambda s: s + to_additive_mask(mask, s.dtype)


def _dropper(p, training):
    return (lambda w: F.dropout(w, p)) if training and p > 0 else (lambda w: w)


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if torch.is_floating_point(mask):
        return mask.type(dtype)
    return torch.where(mask, torch.tensor(float("-inf"), dtype=dtype, device=mask.device),
                       torch.tensor(0.0, dtype=dtype, device=mask.device))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    score = _scorer(q.shape[-1] ** -0.5)
    weigh = _compose(_masker(attn_mask), lambda s: s.softmax(-1), _dropper(dropout_p, training))
    weights = weigh(score(q, k))
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def split_heads(x, num_heads):
    B, L, D = x.shape
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    rows = torch.arange(seq_len, device=device)
    return to_additive_mask(rows[None, :] > rows[:, None], dtype)


def padding_mask(lengths, max_len=None):
    lengths = torch.as_tensor(lengths)
    width = int(lengths.max()) if max_len is None else max_len
    return torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    parts = []
    if attn_mask is not None:
        parts.append(to_additive_mask(attn_mask, dtype))
    if key_padding_mask is not None:
        parts.append(to_additive_mask(key_padding_mask, dtype)[:, None, None, :])
    return sum(parts[1:], parts[0]) if parts else None


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if not (num_heads >= 1 and d_model % num_heads == 0):
            raise ValueError("num_heads must divide d_model")
        self.num_heads, self.d_k, self.dropout = num_heads, d_model // num_heads, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        heads = lambda t: split_heads(t, self.num_heads)  # noqa: E731
        q, k, v = map(heads, self.qkv(x).chunk(3, dim=-1))
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        y, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)
        y = self.out(merge_heads(y))
        return (y, weights) if need_weights else y


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        acts = {"relu": F.relu, "gelu": F.gelu}
        if activation not in acts:
            raise ValueError(activation)
        self.act, self.norm_first, self.p = acts[activation], norm_first, dropout
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        drop = lambda t: F.dropout(t, self.p, self.training)  # noqa: E731
        attend = _compose(lambda t: self.attn(t, attn_mask, key_padding_mask), drop)
        feed = _compose(self.ff1, self.act, drop, self.ff2, drop)

        def residual(sublayer, norm):
            if self.norm_first:
                return lambda t: t + sublayer(norm(t))
            return lambda t: norm(t + sublayer(t))

        return _compose(residual(attend, self.norm1), residual(feed, self.norm2))(x)
