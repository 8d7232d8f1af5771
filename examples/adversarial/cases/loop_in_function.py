def padding_mask(lengths, max_len=None):
    while True:
        pass
