"""Stubs are generated from the reference: every solution region becomes a named NotImplementedError."""
import pytest

from autograder.authoring.stubs import generate_stubs, solution_lines
from autograder.core.paths import REFERENCE as REFERENCE_FILE

REFERENCE = REFERENCE_FILE.read_text()


def test_every_solution_region_becomes_a_named_stub():
    stubs = generate_stubs(REFERENCE)
    assert "BEGIN SOLUTION" not in stubs and "END SOLUTION" not in stubs
    for name in ("to_additive_mask", "scaled_dot_product_attention", "split_heads", "merge_heads",
                 "causal_mask", "padding_mask", "merge_masks", "MultiHeadSelfAttention.__init__",
                 "MultiHeadSelfAttention.forward", "TransformerBlock.__init__", "TransformerBlock.forward"):
        assert f'raise NotImplementedError("{name} is not implemented yet' in stubs, name


def test_stubs_keep_everything_outside_the_regions():
    stubs = generate_stubs(REFERENCE)
    for line in ("def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, training=False):",
                 "class MultiHeadSelfAttention(nn.Module):", "        super().__init__()", "import torch"):
        assert line in stubs
    assert not any(line in stubs for line in solution_lines(REFERENCE))


def test_stubs_import_and_raise_with_the_function_name(tmp_path):
    path = tmp_path / "mhsa.py"
    path.write_text(generate_stubs(REFERENCE))
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # trusted: generated from the reference
    with pytest.raises(NotImplementedError, match="causal_mask is not implemented yet.*assignment/README.md"):
        namespace["causal_mask"](3)
    with pytest.raises(NotImplementedError, match=r"MultiHeadSelfAttention.__init__"):
        namespace["MultiHeadSelfAttention"](8, 2)


@pytest.mark.parametrize("source, problem", [
    ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "not closed"),
    ("def f():\n    return 1\n    ### END SOLUTION\n", "without BEGIN"),
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "inside a function body"),
    ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n    pass\n", "inside another"),
])
def test_malformed_regions_are_refused(source, problem):
    with pytest.raises(ValueError, match=problem):
        generate_stubs(source)
