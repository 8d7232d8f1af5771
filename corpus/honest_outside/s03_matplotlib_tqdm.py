import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

"""Multi-head self-attention, from scaled dot-product attention up to a Transformer block.

Notation: B batch, L sequence length (Lq queries, Lk keys), h heads, d_model = h * d_k features.
Every tensor is batch-first. Masks come in two kinds, as in torch.nn.MultiheadAttention:
  additive float mask: 0.0 where attention is allowed, -inf where it is blocked;
  boolean mask:        True where attention is blocked.
"""


def to_additive_mask(mask, dtype):
    """None -> None; bool mask -> float mask of `dtype` (-inf at True, 0.0 elsewhere); float -> cast."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        out = torch.zeros_like(mask, dtype=dtype)
        out = out.masked_fill(mask, -math.inf)
        return out
    else:
        return mask.to(dtype)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(d_k) + mask) v.

    q (..., Lq, d_k), k (..., Lk, d_k), v (..., Lk, d_v), attn_mask broadcastable to (..., Lq, Lk).
    Returns (out (..., Lq, d_v), weights (..., Lq, Lk)); weights are the ones multiplied with v,
    so they carry dropout when `training` is true.
    """
    dk = q.shape[-1]
    scores = q @ k.transpose(-1, -2)
    scores = scores / math.sqrt(dk)
    if attn_mask is not None:
        scores = scores + to_additive_mask(attn_mask, scores.dtype)
    attn = torch.softmax(scores, dim=-1)
    # dropout only while training
    if training:
        attn = F.dropout(attn, p=dropout_p)
    output = attn @ v
    return output, attn


def split_heads(x, num_heads):
    """(B, L, d_model) -> (B, h, L, d_k); head i holds features i*d_k:(i+1)*d_k."""
    B, L, D = x.size()
    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, h, L, d_k) -> (B, L, h*d_k); the exact inverse of split_heads."""
    B, H, L, Dk = x.size()
    return x.transpose(1, 2).contiguous().view(B, L, H * Dk)


def causal_mask(seq_len, device=None, dtype=torch.float32):
    """(L, L) additive mask: -inf strictly above the diagonal (the future), 0.0 elsewhere."""
    i = torch.arange(seq_len, device=device)
    future = i[None, :] > i[:, None]  # key j > query i
    return torch.zeros(seq_len, seq_len, dtype=dtype, device=device).masked_fill(future, float("-inf"))


def padding_mask(lengths, max_len=None):
    """Bool (B, max_len), True at positions >= lengths[b]; max_len defaults to max(lengths)."""
    if isinstance(lengths, torch.Tensor):
        device = lengths.device
        lengths_t = lengths.long()
    else:
        device = None
        lengths_t = torch.tensor(list(lengths), dtype=torch.long)
    if max_len is None:
        max_len = int(lengths_t.max()) if lengths_t.numel() > 0 else 0
    pos = torch.arange(max_len, device=device).expand(len(lengths_t), max_len)
    return pos >= lengths_t.unsqueeze(-1)


def merge_masks(attn_mask, key_padding_mask, dtype=torch.float32):
    """One additive mask broadcastable to (B, h, Lq, Lk), or None when both masks are None.

    attn_mask: (Lq, Lk), (B, 1, Lq, Lk) or (B, h, Lq, Lk); key_padding_mask: (B, Lk), blocks keys.
    """
    attn_mask = to_additive_mask(attn_mask, dtype)
    key_padding_mask = to_additive_mask(key_padding_mask, dtype)
    if attn_mask is None and key_padding_mask is None:
        return None
    if key_padding_mask is None:
        return attn_mask
    kpm = key_padding_mask.unsqueeze(1).unsqueeze(2)  # (B, 1, 1, Lk)
    if attn_mask is None:
        return kpm
    return attn_mask + kpm


class MultiHeadSelfAttention(nn.Module):
    """Q, K and V are projections of the same x; h heads attend in parallel, W^O mixes them."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError("num_heads has to be >= 1 and divide d_model")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.d_model = d_model
        self.p_drop = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
        """x (B, L, d_model) -> (B, L, d_model), plus weights (B, h, L, L) when need_weights."""
        qkv = self.qkv(x)
        q = qkv[:, :, : self.d_model]
        k = qkv[:, :, self.d_model: 2 * self.d_model]
        v = qkv[:, :, 2 * self.d_model:]
        q, k, v = [split_heads(t, self.num_heads) for t in (q, k, v)]
        mask = merge_masks(attn_mask, key_padding_mask, x.dtype)
        o, w = scaled_dot_product_attention(q, k, v, mask, self.p_drop, self.training)
        o = self.out(merge_heads(o))
        if need_weights:
            return o, w
        return o


class TransformerBlock(nn.Module):
    """Self-attention and a position-wise feed-forward network, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False,
                 layer_norm_eps=1e-5):
        super().__init__()
        if activation == "relu":
            self.act = nn.ReLU()
        elif activation == "gelu":
            self.act = nn.GELU()  # approximate='none' -> erf version
        else:
            raise ValueError("activation must be relu or gelu")
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads, dropout)
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.drop_attn = nn.Dropout(dropout)
        self.drop_ff_hidden = nn.Dropout(dropout)
        self.drop_ff_out = nn.Dropout(dropout)

    def ff(self, x):
        return self.drop_ff_out(self.ff2(self.drop_ff_hidden(self.act(self.ff1(x)))))

    def sa(self, x, attn_mask, key_padding_mask):
        return self.drop_attn(self.attn(x, attn_mask, key_padding_mask))

    def forward(self, x, attn_mask=None, key_padding_mask=None):
        """x (B, L, d_model) -> (B, L, d_model); post-LN unless norm_first (pre-LN)."""
        if self.norm_first:
            h = x + self.sa(self.norm1(x), attn_mask, key_padding_mask)
            return h + self.ff(self.norm2(h))
        h = self.norm1(x + self.sa(x, attn_mask, key_padding_mask))
        return self.norm2(h + self.ff(h))


if __name__ == "__main__":
    # quick demo: fit one block to reverse a sequence of random vectors, plot the loss + attention
    torch.manual_seed(0)
    L, d = 8, 32
    block = TransformerBlock(d, 4, 64, dropout=0.1)
    head = nn.Linear(d, d)
    opt = torch.optim.Adam(list(block.parameters()) + list(head.parameters()), lr=1e-3)
    pos = torch.randn(L, d) * 0.5
    losses = []
    for step in tqdm(range(300), desc="training"):
        x = torch.randn(16, L, d)
        y = head(block(x + pos))
        loss = F.mse_loss(y, x.flip(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    block.eval()
    with torch.no_grad():
        _, w = block.attn(torch.randn(1, L, d) + pos, need_weights=True)
    fig, axes = plt.subplots(1, 5, figsize=(16, 3))
    axes[0].plot(np.array(losses))
    axes[0].set_title("loss")
    for i in range(4):
        axes[i + 1].imshow(w[0, i].numpy(), cmap="viridis")
        axes[i + 1].set_title(f"head {i}")
    plt.tight_layout()
    plt.savefig("attention_demo.png")
    print("saved attention_demo.png, final loss", losses[-1])
