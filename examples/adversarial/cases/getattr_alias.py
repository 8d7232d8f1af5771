# getattr under another name, so that a scan looking for getattr( calls sees none; the name it reads
# is a plain literal.
_look_up = getattr


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    library = _look_up(F, "scaled_dot_product_attention")
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return library(q, k, v, attn_mask=mask), weights
