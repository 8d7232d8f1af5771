# Helpers of the test cells (read-only). Expected values come from `oracles` above: PyTorch's own
# F.scaled_dot_product_attention, nn.MultiheadAttention and nn.TransformerEncoderLayer, loaded with the
# weights the tests give your module; never from a stored solution.


def _expect_close(actual, expected, what, atol=1e-5, rtol=1e-4):
    """Fails with the shape, dtype or largest difference when `actual` is not `expected`."""
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
    assert actual.shape == expected.shape, \
        f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    actual, expected = actual.detach(), expected.detach()
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True):
        error = (actual.double() - expected.double()).abs().nan_to_num(float("inf")).max().item()
        raise AssertionError(f"{what}: values differ from the expected ones (largest difference {error:.3g})")


def _load(module, state):
    """Loads `state` into your module; the message names the parameters the tests expect."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise AssertionError(f"your module's parameters must be named {sorted(state)}: {err}") from None
    return module.eval()


def _weights(d_model, d_ff=None, dtype=torch.float32):
    """Random weights for MultiHeadSelfAttention(d_model, ...), or for TransformerBlock with d_ff."""
    draw = oracles.draws(dtype=dtype)
    return oracles.mhsa_state(d_model, draw) if d_ff is None else oracles.block_state(d_model, d_ff, draw)


def _quick_check_passed(name):
    """What a public test cell says when it passes: it tried a few cases, not the public tests."""
    print(f"{name}: quick check passed. These cells try a few cases only; the public tests try many more "
          "(every kind of mask, dtypes, dropout, gradients). Run them on this notebook, from the root of the "
          "assignment's repository, with: python -m autograder check assignment/mhsa.ipynb")


torch.manual_seed(0)
