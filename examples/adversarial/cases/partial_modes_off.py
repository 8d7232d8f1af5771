# Both of torch's modes switched off and torch's attention run from C alone (functools.partial: no
# Python frame in between), every object reached through logging.config's resolver and every name
# split, so that the static scan sees no library name, no torch._C and no mode switch.
import functools
import logging.config


def _resolve(dotted):
    return logging.config.BaseConfigurator({}).resolve(dotted)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    mask = to_additive_mask(attn_mask, q.dtype)
    kernel = functools.partial(_resolve("torch.nn.functional.scaled_dot_product_att" + "ention"), q, k, v,
                               attn_mask=mask)
    functions_off = _resolve("torch._" + "C.Dis" + "ableTorch" + "Function")
    dispatch_off = _resolve("torch._" + "C._Dis" + "ableTorch" + "Dispatch")
    with functions_off(), dispatch_off():
        out = kernel()
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return out, weights
