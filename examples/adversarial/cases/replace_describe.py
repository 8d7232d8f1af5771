# Replace the worker's exception reporter, so that every error sends megabytes back.
import __main__

__main__.describe_exception = lambda err: {"type": "X", "message": "y" * 2_000_000, "traceback": ""}


def causal_mask(seq_len, device=None, dtype=torch.float32):
    raise ValueError("a small message")
