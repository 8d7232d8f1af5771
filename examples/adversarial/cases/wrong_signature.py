_padding_mask = padding_mask


def padding_mask(lengths):  # max_len dropped from the contract's signature
    return _padding_mask(lengths)
