"""A valid solution that attends one head at a time in a Python loop, then stacks the heads."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_additive_mask(mask, dtype):
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        additive[mask] = float("-inf")
        return additive
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    scores = torch.matmul(q, k.transpose(-2, -1)) * q.size(-1) ** -0.5
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(scores, -1)
    if training:
        weights = nn.functional.dropout(weights, p=dropout_p, training=True)
    return torch.matmul(weights, v), weights


def split_heads(x, num_heads):
    d_k = x.shape[-1] // num_heads
    return torch.stack([x[:, :, i * d_k:(i + 1) * d_k] for i in range(num_heads)], dim=1)


def merge_heads(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    mask = torch.zeros(seq_len, seq_len, dtype=dtype, device=device)
    for i in range(seq_len):
        mask[i, i + 1:] = float("-inf")
    return mask


def padding_mask(lengths, max_len=None):
    lengths = [int(n) for n in lengths]
    width = max(lengths) if max_len is None else max_len
    return torch.tensor([[j >= n for j in range(width)] for n in lengths], dtype=torch.bool)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    merged = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is None:
        return merged
    keys = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]
    return keys if merged is None else merged + keys


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"{num_heads} heads do not divide d_model={d_model}")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        q, k, v = torch.split(self.qkv(x), x.shape[-1], dim=-1)
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        outputs, weights = [], []
        for i in range(self.num_heads):
            cols = slice(i * self.d_k, (i + 1) * self.d_k)
            head_mask = mask
            if mask is not None and mask.dim() == 4:
                head_mask = mask[:, i if mask.shape[1] > 1 else 0]
            y, w = scaled_dot_product_attention(q[..., cols], k[..., cols], v[..., cols], head_mask,
                                                self.dropout, self.training)
            outputs.append(y)
            weights.append(w)
        y = self.out(torch.cat(outputs, dim=-1))
        return (y, torch.stack(weights, dim=1)) if need_weights else y


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in {"relu", "gelu"}:
            raise ValueError(f"activation must be relu or gelu, got {activation}")
        self.activation = F.relu if activation == "relu" else F.gelu
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropouts = nn.ModuleList([nn.Dropout(dropout) for _ in range(3)])

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        drop_attn, drop_hidden, drop_ff = self.dropouts
        residual = x
        if self.norm_first:
            x = self.norm1(x)
        x = residual + drop_attn(self.attn(x, attn_mask, key_padding_mask))
        if not self.norm_first:
            x = self.norm1(x)
        residual = x
        if self.norm_first:
            x = self.norm2(x)
        x = residual + drop_ff(self.ff2(drop_hidden(self.activation(self.ff1(x)))))
        if not self.norm_first:
            x = self.norm2(x)
        return x
