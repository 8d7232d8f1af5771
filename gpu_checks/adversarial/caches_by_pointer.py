"""Cheat, must fail: returns the output it computed last time it saw the same input buffer."""
import math

import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            B, L, d_model = x.shape
            q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)
            weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)
            self.cache[key] = self.out((weights @ v).transpose(1, 2).reshape(B, L, d_model)).detach()
        return self.cache[key]
