def causal_mask(seq_len, device=None, dtype=torch.float32):
    hoard = []
    while True:
        hoard.append(torch.empty(1 << 28, dtype=torch.uint8))  # 256 MB at a time, until refused
