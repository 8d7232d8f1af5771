_causal_mask = causal_mask


def causal_mask(seq_len, device=None, dtype=torch.float32):
    return _causal_mask(seq_len, "meta", dtype)  # a tensor with no data, on no real device
