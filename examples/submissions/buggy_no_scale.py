"""A student's submission, complete and tidy, with one classic bug: the attention scores are never
divided by sqrt(d_k). Everything built on scaled_dot_product_attention inherits it."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    additive = torch.zeros_like(mask, dtype=dtype)
    return additive.masked_fill(mask, -float("inf"))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    logits = torch.einsum("...qd,...kd->...qk", q, k)  # BUG: no division by sqrt(d_k)
    extra = to_additive_mask(attn_mask, logits.dtype)
    if extra is not None:
        logits = logits + extra
    probs = logits.softmax(dim=-1)
    if training and dropout_p:
        probs = F.dropout(probs, dropout_p, training=True)
    return torch.einsum("...qk,...kd->...qd", probs, v), probs


def split_heads(x, num_heads):
    batch, length, width = x.shape
    per_head = width // num_heads
    return x.view(batch, length, num_heads, per_head).permute(0, 2, 1, 3)


def merge_heads(x):
    batch, heads, length, per_head = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(batch, length, heads * per_head)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    upper = torch.ones(seq_len, seq_len, device=device, dtype=torch.bool).triu(1)
    return to_additive_mask(upper, dtype)


def padding_mask(lengths, max_len=None):
    if not torch.is_tensor(lengths):
        lengths = torch.tensor(lengths)
    width = int(lengths.max()) if max_len is None else max_len
    return torch.arange(width, device=lengths.device).unsqueeze(0) >= lengths.unsqueeze(1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    total = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is None:
        return total
    keys = to_additive_mask(key_padding_mask, dtype).unsqueeze(1).unsqueeze(2)
    return keys if total is None else total + keys


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads:
            raise ValueError("d_model must be a multiple of num_heads")
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.num_heads, self.d_k, self.dropout = num_heads, d_model // num_heads, dropout

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        projected = self.qkv(x)
        d_model = projected.shape[-1] // 3
        heads = [split_heads(projected[..., i * d_model:(i + 1) * d_model], self.num_heads) for i in range(3)]
        mask = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
        context, probs = scaled_dot_product_attention(*heads, attn_mask=mask, dropout_p=self.dropout,
                                                      training=self.training)
        result = self.out(merge_heads(context))
        if need_weights:
            return result, probs
        return result


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation}")
        self.activation = getattr(F, activation)
        self.norm1, self.norm2 = (nn.LayerNorm(d_model, eps=layer_norm_eps) for _ in range(2))
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.drop_attn, self.drop_hidden, self.drop_ff = (nn.Dropout(dropout) for _ in range(3))
        self.norm_first = norm_first

    def _attend(self, h, attn_mask, key_padding_mask):
        return self.drop_attn(self.attn(h, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

    def _feed_forward(self, h):
        return self.drop_ff(self.ff2(self.drop_hidden(self.activation(self.ff1(h)))))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        if self.norm_first:
            x = x + self._attend(self.norm1(x), attn_mask, key_padding_mask)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attend(x, attn_mask, key_padding_mask))
        return self.norm2(x + self._feed_forward(x))
