def cross_attention(x, context, num_heads, key_padding_mask=None):
    """The queries x attend to the keys and values context, in h heads; no learned weights.

    x (B, Lq, d_model) gives the queries, context (B, Lk, d_model) the keys and also the values; head i
    uses features i*d_k:(i+1)*d_k of both. key_padding_mask (B, Lk), bool (True at padding positions of
    context, as padding_mask gives it) or additive, blocks keys: no query attends to them.
    Returns (out (B, Lq, d_model), weights (B, h, Lq, Lk)).
    """
    ### BEGIN SOLUTION
    q = split_heads(x, num_heads)  # (B, h, Lq, d_k)
    kv = split_heads(context, num_heads)  # (B, h, Lk, d_k): the keys, and the values too
    mask = merge_masks(None, key_padding_mask, dtype=x.dtype)  # (B, 1, 1, Lk) or None
    out, weights = scaled_dot_product_attention(q, kv, kv, mask)  # (B, h, Lq, d_k), (B, h, Lq, Lk)
    return merge_heads(out), weights
    ### END SOLUTION
