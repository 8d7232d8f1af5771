#+AAo-import torch.nn.functional as _library


# With the coding line above (manifest: prepend), Python reads "+AAo-" as a newline: the import
# runs, though a UTF-8 reading of this file sees only a comment.
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return _library.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights
