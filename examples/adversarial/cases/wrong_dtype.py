_causal_mask = causal_mask


def causal_mask(seq_len, device=None, dtype=torch.float32):
    return _causal_mask(seq_len, device)  # the dtype argument is ignored: always float32
