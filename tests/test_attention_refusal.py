"""Library attention refused in the worker (autograder/isolation/guest/refusal.py), whatever reached it,
and honest use of the standard library's storage and reflection graded in full.

The first tests run one submission of entry points through the real worker, each reaching a library
attention by a route the forbidden-API monitor (torch's modes) cannot see: the modes switched off,
a kernel run from C alone, inference mode, vmap. Every one must fail with the finding. The last ones
grade honest files through the command line, at both isolation levels: full marks and nothing held.
"""
import subprocess
import sys

import pytest
import torch

from autograder.core import errors
from autograder.core.paths import REFERENCE
from autograder.core.rubric import Limits
from autograder.isolation.host.levels import Isolation
from autograder.testing.backends import WorkerBackend
from autograder.testing.calls import Call

ROUTES = '''
import functools
import string


def _reach(dotted):
    return string.Formatter().get_field("0." + dotted, (torch,), {})[0]


def modes_off(q):
    with _reach("_C.Disable" + "TorchFunction")(), _reach("_C._Disable" + "TorchDispatch")():
        return _reach("_scaled_dot_product_att" + "ention_math")(q, q, q)[0]


def from_c_alone(q):
    return functools.partial(_reach("nn.functional.scaled_dot_product_att" + "ention"), q, q, q)()


def inference_mode(q):
    with torch.inference_mode():
        return _reach("ops.aten._scaled_dot_product_flash_att" + "ention_for_cpu")(q, q, q)[0].clone()


def under_vmap(q):
    return torch.func.vmap(_reach("nn.functional.scaled_dot_product_att" + "ention"))(q, q, q)


def native_multi_head(x):
    w = torch.randn(3 * 8, 8)
    return _reach("_native_multi_head_att" + "ention")(x, x, x, 8, 2, w, torch.zeros(24), w[:8], torch.zeros(8))[0]


def library_module_forward(x):
    layer = _reach("nn.modules.activation.Multihead" + "Attention")(8, 2, batch_first=True)
    return layer(x, x, x)[0]


def library_functional(x):
    w = torch.randn(3 * 8, 8)
    xt = x.transpose(0, 1)
    return _reach("nn.functional.multi_head_att" + "ention_forward")(
        xt, xt, xt, 8, 2, w, torch.zeros(24), None, None, False, 0.0, w[:8], torch.zeros(8))[0]


def caught_and_computed_by_hand(q):
    try:
        return _reach("nn.functional.scaled_dot_product_att" + "ention")(q, q, q)
    except RuntimeError:
        return torch.softmax(q @ q.transpose(-2, -1) / math.sqrt(q.size(-1)), -1) @ q
'''


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    path = tmp_path_factory.mktemp("refusal") / "routes.py"
    path.write_text(REFERENCE.read_text() + ROUTES)
    backend = WorkerBackend(path, Isolation("process"), Limits(call_timeout=60, import_timeout=60, memory_mb=3072))
    yield backend
    backend.close()


Q = torch.randn(2, 2, 5, 4)
X = torch.randn(2, 5, 8)


@pytest.mark.parametrize("target, args, refused", [
    ("modes_off", (Q,), "operator aten::_scaled_dot_product_attention_math"),
    ("from_c_alone", (Q,), "operator aten::scaled_dot_product_attention"),
    ("inference_mode", (Q,), "operator aten::_scaled_dot_product_flash_attention_for_cpu"),
    ("under_vmap", (Q,), "operator aten::scaled_dot_product_attention"),
    ("native_multi_head", (X,), "operator aten::_native_multi_head_attention"),
    ("library_module_forward", (X,), "torch module nn.MultiheadAttention"),
    ("library_functional", (X,), "torch function multi_head_attention_forward"),
])
def test_every_route_to_a_library_attention_is_refused_with_the_finding(routes, target, args, refused):
    with pytest.raises(errors.ForbiddenApiError, match="which this assignment forbids") as raised:
        routes.run(Call(target, args))
    assert refused in str(raised.value)


def test_a_refusal_caught_by_the_submission_still_zeroes_the_part(routes):
    """The library computed nothing, and the attempt is still the assignment's finding."""
    with pytest.raises(errors.ForbiddenApiError, match="operator aten::scaled_dot_product_attention"):
        routes.run(Call("caught_and_computed_by_hand", (Q,)))


def test_honest_calls_after_refusals_are_untouched(routes):
    outcome = routes.run(Call("MultiHeadSelfAttention", (X,), init={"d_model": 8, "num_heads": 2},
                              grad_outputs=torch.ones(2, 5, 8)))
    assert outcome.forbidden == [] and outcome.monitor_silent == [] and outcome.output.shape == (2, 5, 8)


PUT_BACK = '''

def put_other_code_in(x):
    _reach("nn.functional.multi_head_att" + "ention_forward").__code__ = (lambda *args, **kwargs: None).__code__
    return x


def keep_a_code_object_on(x):
    _reach("nn.functional.multi_head_att" + "ention_forward").__doc__ = (lambda: x).__code__
    return x
'''


@pytest.mark.parametrize("first", [None, "keep_a_code_object_on"])
def test_a_refused_function_given_other_code_holds_the_grade(tmp_path, first):
    """Refusal.evidence after every call names a refused function whose code is no longer the
    refusal's, and the grade is held: read in one look at all the functions, or one by one once a
    code object sits among a function's attributes (`first`), which alone changes nothing the
    function runs and holds nothing."""
    path = tmp_path / "mhsa.py"
    path.write_text(REFERENCE.read_text() + ROUTES + PUT_BACK)
    backend = WorkerBackend(path, Isolation("process"), Limits(call_timeout=60, import_timeout=60, memory_mb=3072))
    try:
        if first:
            kept = backend.run(Call(first, (X,)))
            assert kept.monitor_silent == [] and kept.forbidden == []
        with pytest.raises(errors.MonitorSilent, match="torch function multi_head_attention_forward runs other "
                                                       "code than the grader's refusal"):
            backend.run(Call("put_other_code_in", (X,)))
    finally:
        backend.close()


HONEST_STDLIB = '''

# Saving weights with pickle, counting live tensors with gc, listing members with inspect: honest
# habits that the static scan used to hold.
import gc
import inspect
import pickle

_SAVED = pickle.loads(pickle.dumps({"scale": torch.ones(3)}))
_METHODS = [name for name, _ in inspect.getmembers(MultiHeadSelfAttention, inspect.isfunction)]


def count_live_tensors():
    return sum(torch.is_tensor(o) for o in gc.get_objects())


if __name__ == "__main__":
    with open("weights.pkl", "wb") as f:
        pickle.dump(MultiHeadSelfAttention(8, 2).state_dict(), f)
'''


@pytest.mark.parametrize("level", ["sandbox", "process"])
def test_honest_use_of_pickle_gc_and_inspect_keeps_full_marks_and_is_not_held(tmp_path, level):
    path = tmp_path / "mhsa.py"
    path.write_text(REFERENCE.read_text() + HONEST_STDLIB)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--suite", "public",
                           "--isolation", level], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "90 / 90 points" in done.stdout.splitlines()[0], done.stdout[:3000]
    assert "HELD" not in done.stdout
