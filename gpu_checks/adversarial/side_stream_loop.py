"""Cheat, must fail (CUDA only): a loop over heads run on a side stream, hidden from CUDA events.

CUDA events on the caller's stream see almost nothing; the host clock's device-wide synchronize sees
all of it."""
import math

import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.stream = None

    def forward(self, x):
        if self.stream is None:
            self.stream = torch.cuda.Stream(x.device)
        self.stream.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(self.stream):
            q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (B, L, d_model)
            heads = []
            for i in range(self.num_heads):
                cols = slice(i * self.d_k, (i + 1) * self.d_k)
                scores = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(self.d_k)  # (B, L, L)
                heads.append(scores.softmax(dim=-1) @ v[..., cols])
            return self.out(torch.cat(heads, dim=-1))
