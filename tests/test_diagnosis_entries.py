"""The diagnosis's entries for classic block and mask mistakes, where a mistake is named, and advice
that fits the code: each entry names its own mistake, and nothing on a correct solution or on a
mistake of another kind; a mistake in scaled_dot_product_attention's own code is named there, the
parts that call it say only that it comes from there; the advice follows the construct the code uses."""
import pytest

from autograder.core.paths import CORPUS, REFERENCE
from autograder.feedback.diagnosis import diagnose, identify
from autograder.feedback.diagnosis.catalog import IDS, WHERE, advice, by_id, code_of, constructs
from autograder.isolation.host.levels import Isolation
from autograder.testing.backends import InProcessBackend, WorkerBackend

PARTS = ["masks", "heads", "sdpa", "mhsa", "block"]
EINSUM = CORPUS / "valid" / "einsum.py"

POST_LN = """            x = self.norm1(x + self_attention(x))
            x = self.norm2(x + feed_forward(x))"""
PRE_LN = """            x = x + self_attention(self.norm1(x))
            x = x + feed_forward(self.norm2(x))"""
BLOCK_FORWARD = f"""        if self.norm_first:
{PRE_LN}
        else:
{POST_LN}"""
SPLIT = "    return x.reshape(B, L, num_heads, d_model // num_heads).transpose(1, 2)"
MERGE = "    return x.transpose(1, 2).reshape(B, L, h * d_k)"
KEYS = "        keys = to_additive_mask(key_padding_mask, dtype)[:, None, None, :]  # (B, 1, 1, Lk)"
SOFTMAX = "    weights = torch.softmax(scores, dim=-1)  # each row sums to 1 over the keys"
DROPOUT = """    if training and dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)"""

# id -> (base file, [(find, replace)], misconception, {part: the part whose code holds it})
CASES = {
    "post-ln-norm-inside-residual": (REFERENCE, [(POST_LN, """            x = x + self.norm1(self_attention(x))
            x = x + self.norm2(feed_forward(x))""")], "norm-inside-residual", {"block": "block"}),
    "pre-ln-norm-inside-residual": (REFERENCE, [(PRE_LN, """            x = x + self.norm1(self_attention(x))
            x = x + self.norm2(feed_forward(x))""")], "norm-inside-residual", {"block": "block"}),
    "post-ln-ff-on-block-input": (REFERENCE, [(POST_LN, """            h = self.norm1(x + self_attention(x))
            x = self.norm2(h + feed_forward(x))""")], "ff-on-block-input", {"block": "block"}),
    "pre-ln-ff-on-block-input": (REFERENCE, [(PRE_LN, """            h = x + self_attention(self.norm1(x))
            x = h + feed_forward(self.norm2(x))""")], "ff-on-block-input", {"block": "block"}),
    "functional-layer-norm-without-affine": (REFERENCE, [(BLOCK_FORWARD, """        shape = x.shape[-1:]
        if self.norm_first:
            x = x + self_attention(F.layer_norm(x, shape, eps=self.norm1.eps))
            x = x + feed_forward(F.layer_norm(x, shape, eps=self.norm2.eps))
        else:
            x = F.layer_norm(x + self_attention(x), shape, eps=self.norm1.eps)
            x = F.layer_norm(x + feed_forward(x), shape, eps=self.norm2.eps)""")],
        "norm-affine-unused", {"block": "block"}),
    "layer-norm-elementwise-affine-false": (REFERENCE, [
        ("self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)",
         "self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, elementwise_affine=False)"),
        ("self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)",
         "self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, elementwise_affine=False)")],
        "norms-without-parameters", {"block": "block"}),
    "dropout-on-scores": (REFERENCE, [(f"{SOFTMAX}\n{DROPOUT}", """    if training and dropout_p > 0.0:
        scores = F.dropout(scores, p=dropout_p)
    weights = torch.softmax(scores, dim=-1)""")], "dropout-on-scores", {"sdpa": "sdpa", "mhsa": "sdpa"}),
    "strided-heads": (REFERENCE, [(SPLIT, "    return x.reshape(B, L, d_model // num_heads, num_heads).permute(0, 3, 1, 2)"),
                                  (MERGE, "    return x.permute(0, 2, 3, 1).reshape(B, L, h * d_k)")],
                      "heads-strided", {"heads": "heads", "mhsa": "heads", "block": "heads"}),
    "key-padding-b1lk": (REFERENCE, [(KEYS, "        keys = to_additive_mask(key_padding_mask, dtype)[:, None, :]")],
                         "padding-mask-3d", {"masks": "masks", "mhsa": "masks", "block": "masks"}),
    "key-padding-unsqueeze-in-place": (REFERENCE, [(KEYS, """        key_padding_mask.unsqueeze_(1).unsqueeze_(1)
        keys = to_additive_mask(key_padding_mask, dtype)""")], "in-place",
        {"masks": "masks", "mhsa": "masks", "block": "masks"}),
    "merge-masks-plus-equals": (REFERENCE, [("        merged = keys if merged is None else merged + keys", """\
        if merged is None:
            merged = keys
        else:
            merged += keys""")],
                                "in-place", {"masks": "masks", "mhsa": "masks", "block": "masks"}),
    "bool-mask-plus-one-in-sdpa": (REFERENCE, [(
        "        scores = scores + to_additive_mask(attn_mask, scores.dtype)",
        "        scores = scores + (attn_mask.float() if attn_mask.dtype == torch.bool else attn_mask)")],
        "bool-mask-plus-one", {"sdpa": "sdpa"}),
    "bool-mask-plus-one-in-to-additive-mask": (REFERENCE, [(
        '        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))',
        "        return mask.to(dtype)")],
        "bool-mask-plus-one", {"masks": "masks", "sdpa": "masks", "mhsa": "masks", "block": "masks"}),
    # entries added after measuring the outside tester's set (tools/outside_diagnosis.py)
    "k-transposed-as-3-d": (REFERENCE, [("scores = q @ k.transpose(-2, -1)", "scores = q @ k.transpose(1, 2)")],
                            "fixed-transpose-dims", {"sdpa": "sdpa"}),
    "padding-mask-as-floats": (REFERENCE, [("    return positions[None, :] >= lengths[:, None]",
                                            "    return (positions[None, :] >= lengths[:, None]).float()")],
                               "padding-mask-not-bool", {"masks": "masks"}),
    "merge-view-of-transposed": (REFERENCE, [(MERGE, "    return x.transpose(1, 2).view(B, L, h * d_k)")],
                                 "view-not-contiguous", {"heads": "heads", "mhsa": "heads", "block": "heads"}),
    "weights-always-returned": (REFERENCE, [("return (y, weights) if need_weights else y", "return y, weights")],
                                "weights-always-returned", {"mhsa": "mhsa"}),
    "dropout-on-attention-output": (REFERENCE, [(f"{SOFTMAX}\n{DROPOUT}\n    return weights @ v, weights", f"""{SOFTMAX}
    out = weights @ v
    if training and dropout_p > 0.0:
        out = F.dropout(out, p=dropout_p)
    return out, weights""")], "dropout-on-output", {"sdpa": "sdpa", "mhsa": "sdpa"}),
    "dropout-on-merged-heads": (REFERENCE, [(
        "        y, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training)\n"
        "        y = self.out(merge_heads(y))",
        "        y, weights = scaled_dot_product_attention(q, k, v, mask)\n"
        "        y = self.out(F.dropout(merge_heads(y), self.dropout, self.training))")],
        "dropout-on-output", {"mhsa": "mhsa"}),
    "gelu-sigmoid": (REFERENCE, [('activations = {"relu": F.relu, "gelu": F.gelu}',
                                  'activations = {"relu": F.relu, "gelu": lambda t: t * torch.sigmoid(1.702 * t)}')],
                     "gelu-sigmoid", {"block": "block"}),
    "pre-ln-norms-swapped": (REFERENCE, [(PRE_LN, """            x = x + self_attention(self.norm2(x))
            x = x + feed_forward(self.norm1(x))""")], "norms-swapped", {"block": "block"}),
    # placement: softmax over dim=2 is right on 3-D inputs and over the queries on 4-D ones
    "softmax-dim-2": (REFERENCE, [(SOFTMAX, "    weights = torch.softmax(scores, dim=2)")], "softmax-dim",
                      {"sdpa": "sdpa", "mhsa": "sdpa", "block": "sdpa"}),
    # advice: the same mistake written with @ and with einsum
    "scores-transposed-matmul": (REFERENCE, [("scores = q @ k.transpose(-2, -1)", "scores = k @ q.transpose(-2, -1)")],
                                 "scores-transposed", {"sdpa": "sdpa", "mhsa": "sdpa", "block": "sdpa"}),
    "scores-transposed-einsum": (EINSUM, [('torch.einsum("...qd,...kd->...qk", q, k)',
                                           'torch.einsum("...qd,...kd->...qk", k, q)')], "scores-transposed",
                                 {"sdpa": "sdpa", "mhsa": "sdpa", "block": "sdpa"}),
}
NEW_ENTRIES = ("norm-inside-residual", "ff-on-block-input", "norm-affine-unused", "norms-without-parameters",
               "dropout-on-scores", "heads-strided", "padding-mask-3d", "bool-mask-plus-one",
               # after measuring the outside tester's set
               "padding-mask-not-bool", "view-not-contiguous", "weights-always-returned", "dropout-on-output",
               "gelu-sigmoid", "norms-swapped")


def _source(case) -> str:
    base, patches, _, _ = CASES[case]
    text = base.read_text()
    for find, replace in patches:
        assert text.count(find) == 1, f"{case}: {find!r} occurs {text.count(find)} times in {base.name}"
        text = text.replace(find, replace)
    return text


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """case -> (source, {part: message}, {part: id}), each diagnosed once; and the reference's."""
    folder = tmp_path_factory.mktemp("entries")
    found = {}
    for case in [*CASES, "reference"]:
        source = REFERENCE.read_text() if case == "reference" else _source(case)
        path = folder / f"{case.replace('-', '_')}.py"
        path.write_text(source)
        backend = InProcessBackend(path)
        found[case] = source, diagnose(backend, PARTS, source=source), \
            {part: m.id for part, m in identify(backend, PARTS).items()}
    return found


def test_every_new_entry_is_in_the_catalog_and_has_a_case():
    assert set(NEW_ENTRIES) <= IDS
    assert set(NEW_ENTRIES) <= {misconception for _, _, misconception, _ in CASES.values()}


@pytest.mark.parametrize("case", CASES)
def test_a_mistake_is_named_where_it_shows_and_nowhere_else(diagnosed, case):
    _, _, misconception, where = CASES[case]
    _, _, named = diagnosed[case]
    assert named == {part: misconception for part in where}


@pytest.mark.parametrize("case", CASES)
def test_a_part_that_only_calls_the_mistake_says_where_it_is(diagnosed, case):
    """The part whose code holds the mistake gets the message itself; a part that calls it is told it
    comes from there, without advice about code it does not hold."""
    _, _, misconception, where = CASES[case]
    _, messages, _ = diagnosed[case]
    statement = by_id(misconception).message
    for part, origin in where.items():
        if part == origin:
            assert messages[part].startswith(statement), messages[part]
        else:
            assert messages[part] == f"from {WHERE[origin]}, which this part calls: {statement}"


@pytest.mark.parametrize("entry", NEW_ENTRIES)
def test_an_entry_stays_silent_on_a_correct_solution_and_on_other_mistakes(diagnosed, entry):
    accused = {case: named for case, (_, _, named) in diagnosed.items()
               if entry in named.values() and (case == "reference" or CASES[case][2] != entry)}
    assert accused == {}


def test_softmax_over_a_fixed_dimension_is_named_in_attention_which_holds_it(diagnosed):
    """dim=2 is right for 3-D inputs and wrong for 4-D ones: self-attention (always 4-D) shows it
    whole, scaled_dot_product_attention only on some probes, but the mistake is written there."""
    _, messages, named = diagnosed["softmax-dim-2"]
    assert named["sdpa"] == "softmax-dim"
    assert messages["mhsa"].startswith("from scaled_dot_product_attention, which this part calls")
    assert messages["block"].startswith("from scaled_dot_product_attention, which this part calls")


def test_advice_follows_the_construct_the_code_uses(diagnosed):
    statement = by_id("scores-transposed").message
    _, matmul, _ = diagnosed["scores-transposed-matmul"]
    _, einsum, _ = diagnosed["scores-transposed-einsum"]
    assert matmul["sdpa"].startswith(statement) and einsum["sdpa"].startswith(statement)
    assert "q @ k.transpose(-2, -1)" in matmul["sdpa"] and "einsum" not in matmul["sdpa"]
    assert "einsum('...qd,...kd->...qk', q, k)" in einsum["sdpa"] and "@" not in einsum["sdpa"]


def test_in_place_advice_names_the_in_place_operations_of_the_code(diagnosed):
    _, messages, _ = diagnosed["merge-masks-plus-equals"]
    assert "Your code has merged += ..." in messages["masks"]
    _, messages, _ = diagnosed["key-padding-unsqueeze-in-place"]
    assert "Your code has .unsqueeze_(...)" in messages["masks"]


def test_without_the_source_the_message_is_the_statement_alone(tmp_path):
    path = tmp_path / "transposed.py"
    path.write_text(_source("scores-transposed-einsum"))
    assert diagnose(InProcessBackend(path), ["sdpa"]) == {"sdpa": by_id("scores-transposed").message}


def test_no_advice_where_the_code_uses_none_or_several_of_the_constructs():
    """Advice for einsum code is wrong for @ code and the other way round: with both, or neither, none."""
    m = by_id("scores-transposed")
    both = "def scaled_dot_product_attention(q, k, v):\n    s = torch.einsum('ij,kj->ik', k, q)\n    return s @ v\n"
    neither = "def scaled_dot_product_attention(q, k, v):\n    return (k[:, None] * q[None]).sum(-1)\n"
    unparsable = "def scaled_dot_product_attention(q, k, v:\n"
    assert [advice(m, source, "sdpa") for source in (both, neither, unparsable)] == ["", "", ""]


def test_the_code_read_is_the_parts_own_and_its_helpers():
    """A helper the function calls is read with it; another function of the contract is not (it is
    graded as its own part)."""
    source = ("def _scores(q, k):\n    return torch.einsum('...qd,...kd->...qk', q, k)\n\n"
              "def to_additive_mask(mask, dtype):\n    return mask @ mask\n\n"
              "def scaled_dot_product_attention(q, k, v, attn_mask=None):\n"
              "    s = _scores(q, k) + to_additive_mask(attn_mask, q.dtype)\n    return s.softmax(-1), s\n")
    found = constructs(code_of(source, "sdpa"))
    assert "einsum" in found and "softmax" in found and "matmul" not in found


def test_an_in_place_change_of_shape_is_seen_through_a_worker(tmp_path):
    """unsqueeze_ changes only the caller's mask's shape: the worker reports the argument as modified
    (the executor compares shapes before bytes), and the diagnosis names it where it is written."""
    path = tmp_path / "unsqueeze_in_place.py"
    path.write_text(_source("key-padding-unsqueeze-in-place"))
    backend = WorkerBackend(path, Isolation("process"))
    try:
        named = {part: m.id for part, m in identify(backend, ["masks", "mhsa"]).items()}
    finally:
        backend.close()
    assert named == {"masks": "in-place", "mhsa": "in-place"}
