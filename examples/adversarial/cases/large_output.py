# A 32 MB tensor for a 4-element call: the reply far outgrows anything the call can need.
def causal_mask(seq_len, device=None, dtype=torch.float32):
    return torch.zeros(1 << 23)
