"""Calibration, should fail: a Python loop over heads.

h small matmuls and softmaxes per call, where the reference launches one of each."""
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
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (B, L, d_model)
        heads = []
        for i in range(self.num_heads):
            cols = slice(i * self.d_k, (i + 1) * self.d_k)
            scores = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(self.d_k)  # (B, L, L)
            heads.append(scores.softmax(dim=-1) @ v[..., cols])  # (B, L, d_k)
        return self.out(torch.cat(heads, dim=-1))
