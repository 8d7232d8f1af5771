def causal_mask(seq_len, device=None, dtype=torch.float32):
    raise RuntimeError("the causal mask is broken")
