"""Cheat-like bug, must fail: right for its first calls, then one NaN in every output."""
import math

import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        B, L, d_model = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)
        y = self.out((weights @ v).transpose(1, 2).reshape(B, L, d_model))
        if self.calls > 4:
            y = y + torch.zeros_like(y).index_fill_(-1, torch.tensor([0], device=y.device), float("nan"))
        return y
