def _hoarding_forward(self, *args, **kwargs):
    hoard = []
    for _ in range(400):
        hoard.append(torch.ones(1 << 30, dtype=torch.uint8))  # 1 GiB, written, until the memory limit refuses
    return hoard


MultiHeadSelfAttention.forward = _hoarding_forward  # every call, in the module and in the block that uses it
