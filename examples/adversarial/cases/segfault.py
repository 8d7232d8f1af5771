def causal_mask(seq_len, device=None, dtype=torch.float32):
    import ctypes

    return ctypes.string_at(0)  # reads address 0: SIGSEGV
