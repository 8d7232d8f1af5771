"""The diagnosis where it was not tuned: mutants made by AST operators (tools/mutate.py),
judged against the catalog's models on fresh inputs (tools/heldout.py).

CI judges a fixed subset (a few seconds); `python benchmarks/diagnosis_generated.py` judges them all
and holds the figures of docs/hidden-tests.md. A wrong diagnosis fails, and so does a right count
below the committed one."""
import pytest
import torch

from autograder.feedback.diagnosis import identify
from autograder.testing.backends import InProcessBackend
from tools import heldout, mutate
from tools.corpus import REFERENCE, lost_parts
from autograder.core.paths import CORPUS
from autograder.core.toml import loads

# Chosen from a full run: in every style, mutants of each kind (matching a model, a check, several
# entries or none), so that a wrong diagnosis of any kind shows here.
SUBSET = (
    "closures:swap_names:89:0", "closures:change_compare:64:1", "closures:negate_condition:79:0",
    "closures:negate_condition:28:0", "closures:change_operator:82:0", "einsum:change_dim:50:1",
    "einsum:change_sqrt:19:0", "einsum:change_compare:83:0", "einsum:swap_targets:68:0",
    "einsum:negate_condition:72:0", "functional:change_sqrt:23:0", "functional:change_infinity:19:0",
    "functional:change_compare:88:0", "head_loop:drop_operand:18:0", "head_loop:drop_operand:105:1",
    "head_loop:drop_statement:23:0", "head_loop:swap_names:50:0", "manual_softmax:swap_names:134:0",
    "manual_softmax:change_dim:45:2", "manual_softmax:drop_keyword:18:0",
    "manual_softmax:negate_condition:126:0", "mhsa:drop_operand:88:1", "mhsa:drop_keyword:137:0",
    "mhsa:change_compare:99:2", "mhsa:drop_call:34:0", "nanogpt_classes:swap_names:86:0",
    "nanogpt_classes:change_sqrt:35:0", "nanogpt_classes:drop_keyword:39:1",
    "separate_projections:drop_statement:27:0", "separate_projections:swap_names:89:4",
    "separate_projections:drop_statement:30:0",
)
RIGHT_IN_SUBSET = 25  # the subset's right count when it was chosen: fewer fails


@pytest.fixture(scope="module")
def generated():
    return mutate.generate()


@pytest.fixture(scope="module")
def judged(generated):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only contend
    try:
        mutants = {m.id: m for m in generated}
        missing = [i for i in SUBSET if i not in mutants]
        assert not missing, f"a style or an operator changed, so these ids are no longer generated: {missing}; " \
                            "choose the subset again from a run of benchmarks/diagnosis_generated.py"
        return heldout.judge_all([mutants[i] for i in SUBSET])
    finally:
        torch.set_num_threads(threads)


def test_the_generated_corpus_is_large_and_varied(generated):
    mutants = generated
    assert len(mutants) >= 300 and len({m.style for m in mutants}) >= 5 and len(mutate.styles()) >= 8
    assert len({m.id for m in mutants}) == len(mutants)


@pytest.mark.parametrize("style", sorted((CORPUS / "styles").glob("*.py")), ids=lambda p: p.stem)
def test_the_styles_written_for_this_set_get_full_marks(style):
    """Otherwise their mutants' mistakes would be read against a wrong solution (corpus/valid is
    graded in tests/test_mutants.py)."""
    lost = lost_parts(style)
    assert not lost, "; ".join(f for failures in lost.values() for f in failures[:3])


@pytest.mark.parametrize("mutant_id", SUBSET)
def test_no_diagnosis_without_evidence_on_fresh_inputs(judged, mutant_id):
    j = judged[mutant_id]
    assert j.verdict != heldout.WRONG, f"{mutant_id} named {j.unbacked}, which its outputs on fresh inputs do not " \
                                       f"reproduce (they reproduce {list(j.matches) or 'nothing'} in {j.part})"


def test_the_right_count_does_not_drop(judged):
    right = sorted(i for i, j in judged.items() if j.verdict == heldout.RIGHT)
    assert len(right) >= RIGHT_IN_SUBSET, f"right for {len(right)} of the subset, {RIGHT_IN_SUBSET} committed"


def test_the_committed_full_figures_meet_the_target():
    """What benchmarks/diagnosis_generated.py measured on the whole set, and fails below."""
    figures = loads((CORPUS / "generated-figures.toml").read_text())
    assert figures["wrong"] == 0 and figures["matched"] >= 100 and figures["right"] >= 0.9 * figures["matched"]


def _mutant_of_reference(tmp_path, find, replace):
    source = REFERENCE.read_text()
    assert source.count(find) == 1
    path = tmp_path / "mutant.py"
    path.write_text(source.replace(find, replace))
    return path


@pytest.mark.parametrize("find, replace, part, expected", [
    # two wrong diagnoses an earlier version gave ("a float32 appears ..."), whose evidence is a shape mismatch
    ("scores = q @ k.transpose(-2, -1)", "scores = k @ q.transpose(-2, -1)", "sdpa", "scores-transposed"),
    ("reshape(B, L, num_heads, d_model // num_heads).transpose(1, 2)", "reshape(B, L, num_heads, d_model // "
     "num_heads)", "heads", "heads-mixed-with-positions"),
    # raising on every probe matches every model that raises there: no evidence of which mistake
    ("scores = q @ k.transpose(-2, -1)", "scores = v @ k.transpose(-2, -1)", "sdpa", None),
])
def test_a_shape_mistake_is_not_called_a_dtype_one(tmp_path, find, replace, part, expected):
    named = identify(InProcessBackend(_mutant_of_reference(tmp_path, find, replace)), [part])
    assert {p: m.id for p, m in named.items()} == ({part: expected} if expected else {})


def test_the_dtype_rule_checks_the_dtype(tmp_path):
    path = _mutant_of_reference(tmp_path, "return weights @ v, weights", "return (weights @ v).float(), weights")
    assert {p: m.id for p, m in identify(InProcessBackend(path), ["sdpa"]).items()} == {"sdpa": "float32-cast"}


def test_wrong_values_do_not_get_the_hint_about_detached_gradients(tmp_path):
    """sdpa fills a boolean mask's scores with 0 (not -inf): the gradient tests report the values that
    are wrong, not "no .detach(), .data or torch.no_grad()". (The mistake is sdpa's own: one in
    to_additive_mask is charged to the masks part, and sdpa's tests pass with a correct one.)"""
    path = _mutant_of_reference(tmp_path, "scores = scores + to_additive_mask(attn_mask, scores.dtype)",
                                "scores = (scores.masked_fill(attn_mask, 0.0) if attn_mask.dtype == torch.bool"
                                " else scores + attn_mask)")
    lost = lost_parts(path)
    gradient_tests = [f for failures in lost.values() for f in failures if "test_gradients" in f]
    assert gradient_tests and not [f for f in gradient_tests if ": gradient of" in f], gradient_tests
