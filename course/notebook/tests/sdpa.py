# Test cells of the `sdpa` part (format: course/notebook/README.md).

# %% public scaled_dot_product_attention
q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
out, weights = scaled_dot_product_attention(q, k, v)
expected = oracles.sdpa_expected(q, k, v)
_expect_weights(weights, expected.weights, "weights of scaled_dot_product_attention(q (2,5,8), k (2,7,8), v (2,7,3))")
_expect_close(out, expected.output, "output of scaled_dot_product_attention(q (2,5,8), k (2,7,8), v (2,7,3))")
_expect_close(weights.sum(-1), torch.ones(2, 5), "row sums of the weights")
# A boolean mask: True blocks, and a blocked key gets a weight of exactly 0 (-inf before the softmax).
blocked = oracles.random_blocked((5, 7), p=0.3)  # every query keeps at least one key
out, weights = scaled_dot_product_attention(q, k, v, attn_mask=blocked)
_expect_weights(weights, oracles.sdpa_expected(q, k, v, blocked).weights, "weights with a bool mask (5, 7)")
assert bool((weights[:, blocked] == 0).all()), "keys a bool mask blocks (True) must get weight exactly 0"
# Dropout only in training: with training=False the weights are not dropped, whatever dropout_p is.
out, weights = scaled_dot_product_attention(q, k, v, attn_mask=blocked, dropout_p=0.5, training=False)
_expect_weights(weights, oracles.sdpa_expected(q, k, v, blocked).weights,
                "weights with dropout_p=0.5 and training=False (dropout is off outside training)")
# float16: a mask filled with -1e9 or -1e6 overflows there; -inf does not.
half = [t.half() for t in (q, k, v)]
out, weights = scaled_dot_product_attention(*half, attn_mask=blocked)
_expect_weights(weights, oracles.sdpa_expected(*(t.float() for t in half), blocked).weights.half(),
                "weights in float16 with a bool mask (fill with -inf, not -1e9)", atol=5e-3, rtol=5e-3)
_quick_check_passed("scaled_dot_product_attention")

# %% hidden scaled_dot_product_attention
# Masks of both kinds, broadcast over batch and heads; extra batch dimensions; d_v != d_k.
q, k, v = torch.randn(2, 3, 4, 16), torch.randn(2, 3, 6, 16), torch.randn(2, 3, 6, 5)
blocked = oracles.random_blocked((4, 6), p=0.3)  # every query keeps at least one key
additive = oracles.additive(blocked, torch.float32)
expected = oracles.sdpa_expected(q, k, v, additive)
for name, mask in (("bool", blocked), ("float", additive)):
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    _expect_close(weights, expected.weights, f"weights with a {name} mask (4, 6) and q (2,3,4,16)")
    _expect_close(out, expected.output, f"output with a {name} mask (4, 6) and q (2,3,4,16)")
    assert bool((weights[..., blocked] == 0).all()), f"a {name} mask must give blocked keys weight 0"
soft = torch.randn(2, 1, 4, 6)  # a float mask that is not only 0 / -inf is added as it is
out, weights = scaled_dot_product_attention(q, k, v, attn_mask=soft)
_expect_close(weights, oracles.sdpa_expected(q, k, v, soft).weights,
              "weights with a float mask of arbitrary values (2,1,4,6)")

# %% hidden scaled_dot_product_attention
# Dropout acts on the weights in training mode only; gradients flow; float64 stays float64.
q, k, v = torch.randn(3, 5, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 8)
expected_weights = oracles.sdpa_expected(q, k, v).weights
out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=False)
_expect_close(weights, expected_weights, "weights with dropout_p=0.5 and training=False (no dropout)")
out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=True)
kept = weights != 0
assert 0 < kept.float().mean() < 1, "with dropout_p=0.5 and training=True some weights must be dropped"
_expect_close(weights[kept], 2 * expected_weights[kept], "kept weights after dropout (scaled by 1/(1-p))")
_expect_close(out, weights @ v, "output with dropout: the dropped-out weights times v")
q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
out, weights = scaled_dot_product_attention(q64, k64, v64)
assert out.dtype == torch.float64, "float64 inputs must give a float64 output"
grads = torch.autograd.grad(out.sum(), (q64, k64, v64))
leaves = [t.detach().clone().requires_grad_() for t in (q64, k64, v64)]
expected_grads = torch.autograd.grad(oracles.sdpa_expected(*leaves).output.sum(), leaves)
for name, grad, expected in zip("qkv", grads, expected_grads):
    _expect_close(grad, expected, f"gradient of the output's sum with respect to {name} (float64)")
