"""Cheat, must fail: slow (30 ms of sleep per call), and hides it from the worker's clocks.

It patches time.perf_counter and CUDA event timing in its own process. Only the grader's clock sees
the truth."""
import math
import time

import torch
import torch.nn as nn

_real_perf_counter = time.perf_counter
_hidden_s = 0.0


def _perf_counter():
    return _real_perf_counter() - _hidden_s


time.perf_counter = _perf_counter
torch.cuda.Event.elapsed_time = lambda self, end: 0.01


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x):
        global _hidden_s
        start = _real_perf_counter()
        time.sleep(0.03)
        B, L, d_model = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)
        y = self.out((weights @ v).transpose(1, 2).reshape(B, L, d_model))
        _hidden_s += _real_perf_counter() - start
        return y
