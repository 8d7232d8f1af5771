_causal_mask = causal_mask


def causal_mask(seq_len, device=None, dtype=torch.float32):
    mask = _causal_mask(seq_len, device, dtype)
    return mask.masked_fill(torch.isinf(mask), float("nan"))
