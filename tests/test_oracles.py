"""The shared oracles (autograder/testing/oracles.py) against the definitions written out, and the
self_comparison markers against the tests they name."""
import ast
import math
from pathlib import Path
from unittest import mock

import pytest
import torch

from autograder.core.paths import SUITE_DIRS
from autograder.testing import oracles

F64 = torch.float64


def formula(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k) + mask) v, written out (instructor-only: tests/ never ships)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + oracles.additive(mask, scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)], ids=["no-batch", "3d", "4d"])
def test_sdpa_oracle_is_the_formula(lead, dtype, tolerance):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (oracles.randn((*lead, n, d), gen, dtype) for n, d in ((4, 8), (6, 8), (6, 3)))
    mask = oracles.random_blocked((4, 6), gen)
    for m in (None, mask, oracles.additive(mask, torch.float32)):
        want_out, want_weights = formula(q, k, v, m)
        got = oracles.sdpa_expected(q, k, v, m)
        assert got.weights.dtype == dtype and got.output.shape == want_out.shape
        torch.testing.assert_close(got.weights, want_weights, rtol=tolerance, atol=tolerance)
        torch.testing.assert_close(got.output, want_out, rtol=tolerance, atol=tolerance)


def test_sdpa_oracle_tells_a_wrong_scale_apart():
    q, k, v = (oracles.randn((2, 5, 16), torch.Generator().manual_seed(i)) for i in range(3))
    right, unscaled = oracles.sdpa_expected(q, k, v), oracles.sdpa_expected(q, k, v, scale=1.0)
    assert not torch.allclose(right.weights, unscaled.weights, rtol=1e-3)


def test_mha_oracle_matches_its_formula_per_head():
    """nn.MultiheadAttention with our names: head i uses features i*d_k:(i+1)*d_k of q, k and v."""
    d, h, gen = 8, 2, torch.Generator().manual_seed(1)
    state = oracles.mhsa_state(d, oracles.draws(gen))
    x, mask = oracles.randn((2, 5, d), gen), oracles.causal_blocked(5)
    got = oracles.mha_expected(state, x, h, attn_mask=mask)
    q, k, v = (x @ state["qkv.weight"].T + state["qkv.bias"]).split(d, dim=-1)
    heads = [formula(q[..., i * 4:(i + 1) * 4], k[..., i * 4:(i + 1) * 4], v[..., i * 4:(i + 1) * 4], mask)
             for i in range(h)]
    out = torch.cat([o for o, _ in heads], dim=-1) @ state["out.weight"].T + state["out.bias"]
    torch.testing.assert_close(got.output, out, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got.weights, torch.stack([w for _, w in heads], dim=1), rtol=1e-10, atol=1e-12)


def test_seeded_draws_give_each_tensor_its_own_seed():
    state = oracles.mhsa_state(4, oracles.seeded_draws(10))
    assert torch.equal(state["qkv.bias"], oracles.randn((12,), torch.Generator().manual_seed(11), scale=0.5))
    assert torch.equal(state["out.weight"], oracles.randn((4, 4), torch.Generator().manual_seed(12), scale=0.5))


def test_a_remembered_oracle_computes_once_for_equal_contents_and_hands_out_copies():
    d, h, gen = 8, 2, torch.Generator().manual_seed(2)
    state, x = oracles.mhsa_state(d, oracles.draws(gen)), oracles.randn((2, 5, d), gen)
    grad = oracles.randn((2, 5, d), gen)
    first = oracles.mha_expected(state, x, h, grad_output=grad)
    first.output.zero_()
    first.param_grads["qkv.weight"].zero_()
    # equal contents in other tensors: the kept result, unchanged by what was done to the first copy
    again = oracles.mha_expected({k: v.clone() for k, v in state.items()}, x.clone(), h, grad_output=grad.clone())
    fresh = oracles.mha_expected.__wrapped__(state, x, h, grad_output=grad)
    for got, want in ((again.output, fresh.output), (again.weights, fresh.weights), (again.x_grad, fresh.x_grad),
                      (again.param_grads["qkv.weight"], fresh.param_grads["qkv.weight"])):
        assert torch.equal(got, want)
    assert again.output.abs().sum() > 0


def test_a_remembered_oracle_computes_again_for_anything_that_differs():
    computed = []

    @oracles.remembered
    def oracle(*args, **kwargs):
        computed.append((args, kwargs))
        return oracles.Expected(torch.zeros(1))

    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    changed = x.clone()
    changed[1, 2] = 5.000000001
    calls = [((x,), {}), ((x.clone(),), {}),                 # equal contents: computed once
             ((changed,), {}),                                # one element differs
             ((x.float(),), {}), ((x.reshape(3, 2),), {}),    # the same values in another dtype or shape
             ((x, 1), {}), ((x, 1.0), {}), ((x, True), {}),   # equal numbers of other types
             ((x,), {"init": {"num_heads": 2}}), ((x,), {"init": {"num_heads": 4}}),
             ((x,), {"init": {"num_heads": 4}}),              # an equal dict again: computed once
             ((x, object()), {}), ((x, object()), {})]        # what the key cannot describe: every time
    for args, kwargs in calls:
        oracle(*args, **kwargs)
    assert len(computed) == len(calls) - 2
    with mock.patch.object(torch.Tensor, "numpy", side_effect=RuntimeError("Numpy is not available")):
        oracle(x)  # a torch with no numpy gives no key: computed, not looked up
    assert len(computed) == len(calls) - 1


def _marked_tests():
    """(file, test name, parity name, names of the file's tests) for every self_comparison marker."""
    for suite in SUITE_DIRS.values():
        for path in sorted(Path(suite).glob("test_*.py")):
            tree = ast.parse(path.read_text())
            tests = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
            for name, node in tests.items():
                for decorator in node.decorator_list:
                    if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("self_comparison"):
                        parity = decorator.keywords[0].value.value
                        yield path.name, name, parity, tests


def test_every_self_comparison_names_a_parity_test_of_its_file():
    marked = list(_marked_tests())
    assert len(marked) >= 10
    marked_names = {(file, name) for file, name, _, _ in marked}
    for file, name, parity, tests in marked:
        assert parity in tests, f"{file}::{name}: no test {parity} in {file}"
        assert (file, parity) not in marked_names, f"{file}::{name}: {parity} is a self-comparison itself"


def test_messages_name_the_contract_parameters_as_the_reference_does():
    """checks.contract_parameters, used to say which argument a submission changed in place, is read
    from the reference's signatures: every function, and every module's forward() without self."""
    import inspect

    from autograder.testing import checks
    from autograder.testing.calls import Call
    from reference import mhsa

    read = checks.contract_parameters()
    for name in rubric_contract():
        target = getattr(mhsa, name)
        signature = inspect.signature(target.forward if isinstance(target, type) else target)
        expected = tuple(signature.parameters)[1 if isinstance(target, type) else 0:]
        assert read[name] == expected, name
    call = Call("padding_mask", (None,))
    assert checks.argument_names(call, ["arg0"]) == ["`lengths`"]
    module_call = Call("MultiHeadSelfAttention", (None, None), init={"d_model": 8, "num_heads": 2})
    assert checks.argument_names(module_call, ["arg1", "arg7"]) == ["`attn_mask`", "argument 8"]


def rubric_contract():
    from autograder.core import rubric

    return rubric.load().contract
    assert checks.argument_names(Call("TransformerBlock", (None,), init={}), ["arg0", "arg5"]) == \
        ["`x`", "argument 6"]
