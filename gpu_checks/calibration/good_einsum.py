"""Calibration, should pass: einsum for the projections' heads, the scores and the weighted sum."""
import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).unflatten(-1, (3, self.num_heads, self.d_k)).unbind(2)  # 3 x (B, L, h, d_k)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.d_k ** -0.5  # (B, h, L, L)
        y = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(dim=-1), v)  # (B, L, h, d_k)
        return self.out(y.flatten(2))
