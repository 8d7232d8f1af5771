# Test cells of the `block` part (format: course/notebook/README.md).

# %% public TransformerBlock
state = _weights(16, 32)
x = torch.randn(2, 5, 16)
# Both norm orders, built with dropout=0.5 and run in eval mode (_load), where dropout is off.
for norm_first in (False, True):
    init = dict(d_model=16, num_heads=4, d_ff=32, dropout=0.5, norm_first=norm_first)
    mine = _load(TransformerBlock(**init), state)
    _expect_close(mine(x), oracles.block_expected(state, x, init).output,
                  f"TransformerBlock(16, 4, 32, dropout=0.5, norm_first={norm_first}) in eval mode against "
                  "nn.TransformerEncoderLayer")
_quick_check_passed("TransformerBlock")

# %% hidden TransformerBlock
# Pre-LN and post-LN, relu and gelu, with causal and key-padding masks, and layer_norm_eps.
x = torch.randn(3, 6, 24)
causal = causal_mask(6)
keys = padding_mask(torch.tensor([6, 3, 5]))
for norm_first in (False, True):
    for activation in ("relu", "gelu"):
        init = dict(d_model=24, num_heads=6, d_ff=40, activation=activation, norm_first=norm_first, layer_norm_eps=1e-3)
        state = _weights(24, 40)
        mine = _load(TransformerBlock(**init), state)
        what = f"TransformerBlock(24, 6, 40, activation={activation!r}, norm_first={norm_first}, layer_norm_eps=1e-3)"
        _expect_close(mine(x), oracles.block_expected(state, x, init).output, what)
        _expect_close(mine(x, attn_mask=causal, key_padding_mask=keys),
                      oracles.block_expected(state, x, init, attn_mask=causal, key_padding_mask=keys).output,
                      f"{what} with causal and key-padding masks")

# %% hidden TransformerBlock
# Gradients (float64), dropout in training mode only, and a clear error for unknown activations.
state = _weights(16, 24, dtype=torch.float64)
mine = _load(TransformerBlock(16, 2, 24).double(), state)
x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
grad_out = torch.randn(2, 5, 16, dtype=torch.float64)
(got,) = torch.autograd.grad(mine(x), x, grad_out)
expected = oracles.block_expected(state, x, dict(d_model=16, num_heads=2, d_ff=24), grad_output=grad_out).x_grad
_expect_close(got, expected, "gradient of TransformerBlock with respect to x (float64)", atol=1e-8, rtol=1e-6)
mine = TransformerBlock(16, 2, 24, dropout=0.5).eval()
x = torch.randn(2, 5, 16)
assert torch.equal(mine(x), mine(x)), "in eval mode dropout must be off"
mine.train()
assert not torch.allclose(mine(x), mine(x)), "in training mode with dropout=0.5 two calls must differ"
try:
    TransformerBlock(16, 2, 24, activation="tanh")
except ValueError:
    pass
else:
    raise AssertionError("TransformerBlock(..., activation='tanh') must raise ValueError")
