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
        neg_inf = torch.tensor(float("-inf"), dtype=dtype, device=mask.device)
        zero = torch.tensor(0.0, dtype=dtype, device=mask.device)
        return torch.where(mask, neg_inf, zero)
    return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.size(-1) ** -0.5)
    mask = to_additive_mask(attn_mask, scores.dtype)
    if mask is not None:
        scores = scores + mask
    weights = F.softmax(scores, dim=-1)
    weights = F.dropout(weights, p=dropout_p, training=training)
    return torch.matmul(weights, v), weights


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, L, _ = x.shape
    return x.reshape(B, L, num_heads, -1).transpose(1, 2)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, _, L, _ = x.shape
    return x.transpose(1, 2).reshape(B, L, -1)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    return to_additive_mask(~torch.tril(ones), dtype)


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    lengths = torch.as_tensor(lengths)
    if max_len is None:
        max_len = int(lengths.max())
    return torch.arange(max_len, device=lengths.device)[None, :] >= lengths[:, None]


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    result = None
    if attn_mask is not None:
        result = to_additive_mask(attn_mask, dtype)
    if key_padding_mask is not None:
        kp = to_additive_mask(key_padding_mask, dtype).view(key_padding_mask.shape[0], 1, 1, -1)
        result = kp if result is None else result + kp
    return result


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1:
            raise ValueError("need at least one head")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.attn_dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        y, w = scaled_dot_product_attention(q, k, v, mask, self.attn_dropout, self.training)
        y = self.out(merge_heads(y))
        return (y, w) if need_weights else y


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation should be relu/gelu, not {activation}")
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

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        act = F.relu if self.activation == "relu" else F.gelu

        def sa(t):
            return self.dropout1(self.attn(t, attn_mask=attn_mask, key_padding_mask=key_padding_mask))

        def ff(t):
            return self.dropout2(self.ff2(self.dropout(act(self.ff1(t)))))

        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + ff(self.norm2(x))
        else:
            x = self.norm1(x + sa(x))
            x = self.norm2(x + ff(x))
        return x


if __name__ == "__main__":
    # Smoke test: a tiny causal language model that learns to copy the previous token.
    torch.manual_seed(42)
    vocab, L, d_model, heads = 11, 12, 32, 4

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(torch.randn(L, d_model) * 0.02)
            self.blocks = nn.ModuleList([TransformerBlock(d_model, heads, 64, dropout=0.1, norm_first=True,
                                                          activation="gelu") for _ in range(2)])
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, idx, lengths):
            h = self.emb(idx) + self.pos[: idx.shape[1]]
            cm = causal_mask(idx.shape[1], device=idx.device)
            pm = padding_mask(lengths, idx.shape[1])
            for blk in self.blocks:
                h = blk(h, attn_mask=cm, key_padding_mask=pm)
            return self.head(self.ln(h))

    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(301):
        idx = torch.randint(1, vocab, (32, L))
        lengths = torch.randint(L // 2, L + 1, (32,))
        logits = model(idx, lengths)
        # target at position t is the token at t-1 (copy the previous token); ignore padded positions
        target = torch.cat([torch.zeros(32, 1, dtype=torch.long), idx[:, :-1]], dim=1)
        target = target.masked_fill(padding_mask(lengths, L), -100)
        target[:, 0] = -100
        loss = F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        idx = torch.randint(1, vocab, (4, L))
        pred = model(idx, torch.full((4,), L)).argmax(-1)
        acc = (pred[:, 1:] == idx[:, :-1]).float().mean().item()
    print(f"copy-previous-token accuracy: {acc:.2%}")

