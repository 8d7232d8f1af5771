"""Cheat, must fail: turns TF32 on for its float32 matmuls (about 8x the FP32 rate on an H100)."""
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
        torch.backends.cuda.matmul.allow_tf32 = True
        B, L, d_model = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(B, L, d_model))
