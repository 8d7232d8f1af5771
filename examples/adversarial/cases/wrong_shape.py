_padding_mask = padding_mask


def padding_mask(lengths, max_len=None):
    return _padding_mask(lengths, max_len).T  # (max_len, B) instead of (B, max_len)
