# torch's C module by operator.attrgetter and a computed name, then the fused kernel's C binding
# from it: no attribute of the source names either.
import operator


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    internals = operator.attrgetter("_" + "C")(torch)
    library = operator.attrgetter("_nn.scaled_dot" + "_product_attention")(internals)
    mask = to_additive_mask(attn_mask, q.dtype)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return library(q, k, v, attn_mask=mask), weights
