"""Calibration, should fail badly: a Python loop over query positions (L rows, one at a time)."""
import math

import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x):
        B, L, d_model = x.shape
        q, k, v = (t.view(B, L, self.num_heads, self.d_k).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))  # 3 x (B, h, L, d_k)
        rows = []
        for i in range(L):
            scores = q[:, :, i:i + 1] @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, 1, L)
            rows.append(scores.softmax(dim=-1) @ v)  # (B, h, 1, d_k)
        return self.out(torch.cat(rows, dim=2).transpose(1, 2).reshape(B, L, d_model))
