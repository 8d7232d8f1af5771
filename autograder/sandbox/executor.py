"""Carries out one call on a loaded submission: the same code in the worker and in-process.

A call is plain data (see autograder.calls.Call): which function or class, its arguments, and for
a class the constructor arguments, weights, mode and an optional backward pass. The result is
plain data too: outputs, gradients, which inputs were modified in place, forbidden APIs used.
"""
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Fragments of torch-level function names (TorchFunctionMode) and aten operator prefixes
# (TorchDispatchMode) that do the whole attention computation for the student. Names, not objects,
# so getattr tricks are caught too; fragments, because torch has many private variants
# (torch._scaled_dot_product_attention_math, torch.ops.aten._scaled_dot_product_flash_attention...)
# and the composite ones decompose before an operator-level check could see them. The same fragments
# as the static scan's (autograder/static_check.py ATTENTION_FRAGMENTS).
FORBIDDEN_FUNCTIONS = ("scaled_dot_product", "scaled_dot_attention", "multi_head_attention", "flash_attention",
                       "efficient_attention", "cudnn_attention", "fused_attention", "_transformer_encoder_layer",
                       "fused_sdp")
FORBIDDEN_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product",  # _math, _flash_attention
                 # (_for_cpu), _efficient_attention, _cudnn_attention, _fused_attention_overrideable
                 "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd",
                 "aten::_fused_sdp_choice", "aten::_efficient_attention", "aten::_flash_attention",
                 "aten::_cudnn_attention", "aten::_triton_scaled_dot_attention", "aten::_triton_multi_head_attention")
FORBIDDEN_MODULES = ("MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
                     "TransformerEncoderLayer", "TransformerDecoderLayer")
# What the record says when the monitor did not see its own canary: the grader holds such a grade
# for review (grading.run_suites) instead of trusting a record that may have been switched off.
MONITOR_SILENT = "the forbidden-API monitor stopped reporting"


class ForbiddenApiMonitor(TorchFunctionMode):
    """Records forbidden torch functions and aten operators called while it is active.

    The lists are bound when this module is loaded (default arguments), before any submission
    runs: rebinding the module's names later (`executor.FORBIDDEN_FUNCTIONS = ()`) changes nothing.
    The record lives in the submission's process, so it cannot be trusted blindly: `check_canary`,
    called while the monitor is active after the student's code returns, runs one operation on a
    tensor only the monitor knows; if either mode did not see it (a mode popped off torch's stack, the
    monitor's methods replaced), the record says MONITOR_SILENT and the grader holds the grade for a
    person. Switching the modes off only around a call (DisableTorchFunction) is left to the static
    scan, which holds any use of those switches.
    """

    def __init__(self, functions=FORBIDDEN_FUNCTIONS, ops=FORBIDDEN_OPS):
        super().__init__()
        self.used = []
        self._functions = functions
        self._ops = _OpRecorder(self.used, ops)
        self._canary = None
        self.saw_canary = False

    def __enter__(self):
        self._ops.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self._ops.__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        __tracebackhide__ = True
        if self._canary is not None and args and args[0] is self._canary:
            self.saw_canary = True
        name = getattr(func, "__name__", "")
        if any(fragment in name for fragment in self._functions):
            _note(self.used, f"torch function {name}")
        return func(*args, **(kwargs or {}))

    def check_canary(self) -> None:
        """Run the canary through both modes; note MONITOR_SILENT unless both saw it."""
        self._canary = self._ops.canary = torch.zeros(1)
        self.saw_canary = self._ops.saw_canary = False
        torch.neg(self._canary)
        if not (self.saw_canary and self._ops.saw_canary):
            _note(self.used, f"{MONITOR_SILENT} (its check operation was not recorded)")
        self._canary = self._ops.canary = None


class _OpRecorder(TorchDispatchMode):
    def __init__(self, used, forbidden):
        super().__init__()
        self.used = used
        self._forbidden = forbidden
        self.canary = None
        self.saw_canary = False

    @classmethod
    def _should_skip_dynamo(cls):
        # Nothing here is compiled; without this, torch wraps __torch_dispatch__ in a dynamo guard
        # whose first use imports torch._dynamo: about 3 s more for every worker start.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        __tracebackhide__ = True
        if self.canary is not None and args and args[0] is self.canary:
            self.saw_canary = True
        name = func._schema.name
        if name.startswith(self._forbidden):
            _note(self.used, f"operator {name}")
        return func(*args, **(kwargs or {}))


def _note(used, what):
    if what not in used:
        used.append(what)


def forbidden_submodules(module):
    return [f"nn.{type(m).__name__} at '{name or 'self'}'" for name, m in module.named_modules()
            if type(m).__module__.startswith("torch.nn") and type(m).__name__ in FORBIDDEN_MODULES]


def execute(submission, call: dict) -> dict:
    """Runs `call` against the module object `submission`; exceptions propagate to the caller."""
    __tracebackhide__ = True  # in-process under pytest: the student reads their own frames only
    target = getattr(submission, call["target"], None)
    if target is None:
        raise AttributeError(f"your mhsa.py defines no '{call['target']}'")
    args, kwargs = list(call.get("args", ())), dict(call.get("kwargs", {}))
    result = {"output": None, "input_grads": {}, "param_grads": {}, "attributes": {}, "mutated": [],
              "forbidden": []}
    seed_cpu(call.get("seed", 0))
    monitor = ForbiddenApiMonitor()
    fn = target
    if call.get("init") is not None:
        with monitor:
            fn = target(**call["init"])
            monitor.check_canary()
        if call.get("dtype") is not None:
            fn = fn.to(call["dtype"])
        if call.get("state") is not None:
            fn.load_state_dict(call["state"], strict=True)
        fn.train(bool(call.get("training", False)))
        result["attributes"] = describe(fn)
        result["forbidden"].extend(forbidden_submodules(fn))
        if call.get("construct_only"):
            result["forbidden"].extend(monitor.used)
            return result

    backward = call.get("grad_outputs") is not None
    named = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
    if backward:
        for name, a in named.items():
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a.requires_grad_(True)
    before = {name: a.detach().clone() for name, a in named.items() if isinstance(a, torch.Tensor)}
    with monitor:
        out = fn(*args, **kwargs)
        if backward:
            outputs = [t for t in _tensors(out) if t.requires_grad]
            grads = _tensors(call["grad_outputs"])[:len(outputs)]
            if outputs:
                torch.autograd.backward(outputs, grads)
        monitor.check_canary()
    result["output"] = out
    result["mutated"] = [name for name, old in before.items() if not same_bits(named[name].detach(), old)]
    if backward:
        result["input_grads"] = {name: a.grad for name, a in named.items()
                                 if isinstance(a, torch.Tensor) and a.is_floating_point()}
        if isinstance(fn, torch.nn.Module):
            result["param_grads"] = {name: p.grad for name, p in fn.named_parameters()}
    result["forbidden"].extend(monitor.used)
    return result


def seed_cpu(seed: int) -> None:
    """torch.manual_seed's effect on the CPU generator, which every test input and the submission's
    dropout draw from. torch.manual_seed itself also queues a seed for each lazy accelerator backend
    (CUDA, XPU, MTIA) with the caller's formatted stack: milliseconds under pytest's deep stacks, paid
    on every call and every test. An accelerator already in use is seeded as torch.manual_seed would."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def describe(module) -> dict:
    """What the grader may check about a constructed module, as plain data."""
    plain = (bool, int, float, str)
    return {
        "class": type(module).__name__,
        "params": {name: list(p.shape) for name, p in module.named_parameters()},
        "children": {name: type(m).__name__ for name, m in module.named_children()},
        "fields": {name: value for name, value in vars(module).items()
                   if not name.startswith("_") and isinstance(value, plain)},
        "training": module.training,
    }


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for item in obj for t in _tensors(item)]
    return []


def same_bits(a, b):
    """Equality that treats NaN like any other value: an in-place write is a change of bits."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.numel() == 0 or torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
