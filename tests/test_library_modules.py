"""The run-time monitor records a library attention module however it is reached, and flex_attention.

An outside tester got full marks with a MultiHeadSelfAttention.forward that handed everything to
torch.ao.nn.quantizable.MultiheadAttention, reached through a mapping and functional_call without
writing its name: that module computes with plain bmm and softmax, so neither the static scan nor the
monitor's function and operator names saw it. These tests grade that file and its variants through
the real worker, prove the monitor's canary covers its new module hook, and that a library module an
honest student runs outside the grader's calls (a comparison at import) costs nothing.
"""
from dataclasses import replace

import pytest
import torch

from autograder.core import errors
from autograder.core import rubric as rubric_file
from autograder.core.paths import REFERENCE
from autograder.core.rubric import Limits
from autograder.integrity.static_check import scan
from autograder.isolation.guest import executor
from autograder.isolation.guest.executor import MONITOR_SILENT, ForbiddenApiMonitor
from autograder.isolation.host.levels import Isolation
from autograder.pipeline import grading
from autograder.testing.backends import WorkerBackend
from autograder.testing.calls import Call
from autograder.record.grade import Status

RUBRIC = rubric_file.load()
FAST = replace(RUBRIC, limits=replace(RUBRIC.limits, call_timeout=6.0, import_timeout=30.0))
QUANTIZABLE = "torch module torch.ao.nn.quantizable.modules.activation.MultiheadAttention"

# The outside tester's file: the reference with this appended (no library name written anywhere).
ATTACK = '''
import torch.ao.quantization
from torch.func import functional_call
_LIB = list(torch.ao.quantization.get_default_custom_config_dict()['float_to_observed_custom_module_class'].values())[-1]

def _forward(self, x, attn_mask=None, key_padding_mask=None, need_weights=False):
    B, L, d = x.shape
    h = self.num_heads
    lib = _LIB(d, h, dropout=self.dropout, bias=self.qkv.bias is not None).to(dtype=x.dtype, device=x.device)
    lib.train(self.training)
    W = self.qkv.weight
    p = {"linear_Q.weight": W[:d], "linear_K.weight": W[d:2*d], "linear_V.weight": W[2*d:],
         "out_proj.weight": self.out.weight, "in_proj_weight": W}
    if self.qkv.bias is not None:
        b = self.qkv.bias
        p.update({"linear_Q.bias": b[:d], "linear_K.bias": b[d:2*d], "linear_V.bias": b[2*d:],
                  "out_proj.bias": self.out.bias, "in_proj_bias": b})
    am = merge_masks(attn_mask, key_padding_mask, dtype=x.dtype)
    if am is not None:
        am = am.expand(B, h, L, L).reshape(B * h, L, L)
    xt = x.transpose(0, 1)
    y, w = functional_call(lib, p, (xt, xt, xt), dict(key_padding_mask=None, need_weights=True,
                           attn_mask=am, average_attn_weights=False))
    y = y.transpose(0, 1)
    return (y, w) if need_weights else y

MultiHeadSelfAttention.forward = _forward
'''

# Every other route into a library module, one entry point each, for one worker. The modules built at
# import run there too, outside any grader call, as an honest student's comparison would.
ROUTES = '''
import torch.ao.quantization
from torch.func import functional_call
import torch.nn.attention.flex_attention as flex

_LIB = list(torch.ao.quantization.get_default_custom_config_dict()['float_to_observed_custom_module_class'].values())[-1]
_x = torch.randn(5, 2, 8)
_AT_IMPORT = _LIB(8, 2)
_AT_IMPORT.forward(_x, _x, _x)
_COMPARISON = nn.MultiheadAttention(8, 2)
_COMPARISON(_x, _x, _x)


def forward_called_directly(x):
    return _AT_IMPORT.forward(x, x, x)[0]


def forward_built_here_called_directly(x):
    return _LIB(8, 2).forward(x, x, x)[0]


def through_functional_call(x):
    return functional_call(_AT_IMPORT, {}, (x, x, x))[0]


def inner_method_with_another_self(x):
    return _LIB._forward_impl(_AT_IMPORT, x, x, x)[0]


class _StandIn:
    """The library's fields, its submodules as plain functions: no module is called at all."""

    def __getattr__(self, name):
        value = getattr(_AT_IMPORT, name)
        return value.forward if name.startswith(("linear_", "dequant", "quant_", "out_proj")) else value


def inner_method_on_a_stand_in(x):
    return _LIB._forward_impl(_StandIn(), x, x, x)[0]


class _Derived(_LIB):
    pass


class HoldsADerivedOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = _Derived(8, 2)

    def forward(self, x):
        return x


def through_flex_attention(q):
    return flex.flex_attention(q, q, q)


def hooks_cleared(x):
    torch.nn.modules.module._global_forward_pre_hooks.clear()
    return x
'''


def test_a_library_module_reached_without_its_name_zeroes_the_parts_it_runs_in(tmp_path):
    """The outside tester's file: 90/90 before, now mhsa and block score 0 with the reason, and the
    parts that never call the library keep their points."""
    path = tmp_path / "delegates.py"
    path.write_text(REFERENCE.read_text() + ATTACK)
    assert scan(path.read_text()) == [], "the static scan sees nothing: the run-time monitor must"
    grade = grading.grade(path, suites=("public",), isolation="process", rubric=FAST, extras=False)
    assert grade.status != Status.HELD, grade.held
    assert set(grade.forbidden) == {"mhsa", "block"}, grade.forbidden
    assert all(any(QUANTIZABLE in reason for reason in grade.forbidden[part]) for part in ("mhsa", "block"))
    scores = {name: part for name, part in grade.parts.items()}
    assert scores["mhsa"].units == scores["block"].units == 0
    assert all(scores[name].units == scores[name].max_units > 0 for name in ("sdpa", "heads", "masks"))


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    path = tmp_path_factory.mktemp("routes") / "routes.py"
    path.write_text(REFERENCE.read_text() + ROUTES)
    backend = WorkerBackend(path, Isolation("process"), Limits(call_timeout=60, import_timeout=60, memory_mb=3072))
    yield backend
    backend.close()


X = torch.randn(5, 2, 8)


@pytest.mark.parametrize("target, recorded", [
    ("forward_called_directly", QUANTIZABLE),
    ("forward_built_here_called_directly", QUANTIZABLE),
    ("through_functional_call", QUANTIZABLE),
    ("inner_method_with_another_self", QUANTIZABLE),
    ("inner_method_on_a_stand_in", QUANTIZABLE),
    ("through_flex_attention", "flex_attention"),
])
def test_every_route_into_a_library_attention_is_recorded_by_the_worker(routes, target, recorded):
    args = (torch.randn(1, 2, 8, 4),) if target == "through_flex_attention" else (X,)
    with pytest.raises(errors.ForbiddenApiError, match="which this assignment forbids") as raised:
        routes.run(Call(target, args))
    assert recorded in str(raised.value)


def test_a_derived_library_module_held_as_a_submodule_is_refused_when_built(routes):
    """Inside a grader's call the library module cannot even be constructed (refusal.py): the
    submodule never exists, and the finding names the class."""
    with pytest.raises(errors.ForbiddenApiError, match=f"{QUANTIZABLE}, which this assignment forbids"):
        routes.run(Call("HoldsADerivedOne", (X,), init={}))


def test_library_modules_run_at_import_cost_an_honest_call_nothing(routes):
    """_COMPARISON and _AT_IMPORT ran while the submission was imported: no grader call watched them."""
    x = torch.randn(2, 5, 8)
    outcome = routes.run(Call("MultiHeadSelfAttention", (x,), init={"d_model": 8, "num_heads": 2},
                              grad_outputs=torch.ones(2, 5, 8)))
    assert outcome.forbidden == [] and outcome.output.shape == (2, 5, 8)


def test_cleared_module_hooks_silence_the_monitor_and_say_so(routes):
    """Clearing torch's global hook table would hide a library module from the hook (one the grader
    did not refuse): the canary notices, and the grader holds the grade for a person
    (grading.run_suites, on errors.MonitorSilent)."""
    with pytest.raises(errors.MonitorSilent, match=MONITOR_SILENT):
        routes.run(Call("hooks_cleared", (X,)))
    assert routes.run(Call("MultiHeadSelfAttention", (torch.randn(2, 5, 8),),
                           init={"d_model": 8, "num_heads": 2})).forbidden == [], "the next call is watched again"


def test_the_canary_notices_module_hooks_that_no_longer_run():
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    monitor = ForbiddenApiMonitor()
    with monitor:
        saved = dict(hooks)
        hooks.clear()
        try:
            monitor.check_canary()
        finally:
            hooks.update(saved)
    assert monitor.silent == ["torch's module hooks no longer run"] and monitor.used == [], monitor.silent
    intact = ForbiddenApiMonitor()
    with intact:
        intact.check_canary()
    assert intact.used == [] and intact.silent == []


def test_the_module_hook_lives_only_while_the_monitor_is_active():
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    before = dict(hooks)
    monitor = ForbiddenApiMonitor()
    with monitor:
        assert len(hooks) == len(before) + 1
    assert dict(hooks) == before
    with pytest.raises(ValueError), monitor:
        raise ValueError("a student's error")
    assert dict(hooks) == before, "removed when the call raises too"


def test_the_family_is_decided_by_the_class_torch_defines():
    from torch.ao.nn.quantizable import MultiheadAttention as Quantizable

    class Honest(torch.nn.Module):  # a student's class named like a library one is theirs
        pass

    Honest.__name__ = "MultiheadAttention"
    assert executor.library_attention_class(Quantizable) is Quantizable
    assert executor.library_attention_class(type("Mine", (torch.nn.TransformerEncoderLayer,), {})) \
        is torch.nn.TransformerEncoderLayer
    assert executor.library_attention_class(Honest) is None
    assert executor.library_attention_class(torch.nn.Linear) is None
