"""Cheat, must be flagged (CUDA only): a thread keeps the GPU busy to slow the reference down.

The thread keeps the GPU busy whenever its own forward is not running, which slows the reference's
calls (timed in another process, on the same GPU) and so flatters the ratio. Caught by timing the
reference alone once this worker is gone."""
import math
import threading
import time

import torch
import torch.nn as nn

_in_forward = threading.Event()


def _hammer():
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    while True:
        if _in_forward.is_set():
            time.sleep(1e-4)
            continue
        with torch.cuda.stream(stream):
            a = (a @ a).clamp_(-1, 1)  # about 30 us of tensor-core work, so its own calls wait little
        stream.synchronize()


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.thread = None

    def forward(self, x):
        if self.thread is None:
            self.thread = threading.Thread(target=_hammer, daemon=True)
            self.thread.start()
        _in_forward.set()
        B, L, d_model = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.d_k).permute(2, 0, 3, 1, 4)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)
        y = self.out((weights @ v).transpose(1, 2).reshape(B, L, d_model))
        _in_forward.clear()
        return y
