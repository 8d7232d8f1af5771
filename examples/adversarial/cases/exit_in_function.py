import sys


def causal_mask(seq_len, device=None, dtype=torch.float32):
    sys.exit(1)
