# The run-time monitor (a pair of torch modes) switched off around torch's own attention kernel:
# DisableTorchFunction hides the call from the function mode, and the kernel decomposes into plain
# operators before the dispatch mode could name it. Written plainly, so the scan sees both.
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    mask = to_additive_mask(attn_mask, q.dtype)
    with torch._C.DisableTorchFunction():
        return torch._scaled_dot_product_attention_math(q, k, v, attn_mask=mask, dropout_p=dropout_p if training else 0.0)
