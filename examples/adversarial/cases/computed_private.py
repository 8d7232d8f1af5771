# torch's C module by a computed name, and the fused kernel from it.
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    internals = getattr(torch, "_" + "C")
    library = getattr(getattr(internals, "_" + "nn"), "scaled_dot" + "_product_attention")
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return library(q, k, v, attn_mask=mask), weights
