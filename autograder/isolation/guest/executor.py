"""Carries out one call on a loaded submission: the same code in the worker and in-process.

A call is plain data (see autograder.testing.calls.Call): which function or class, its arguments, and for
a class the constructor arguments, weights, mode and an optional backward pass. The result is
plain data too: outputs, gradients, which inputs were modified in place, forbidden APIs used.
"""
import contextlib
import os
import re
import sys
from collections import deque
from sys import _getframe  # bound before any submission runs, as the lists below are
from types import CodeType, FunctionType

import torch
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Fragments of torch-level function names (TorchFunctionMode) and aten operator prefixes
# (TorchDispatchMode) that do the whole attention computation for the student. Names, not objects,
# so getattr tricks are caught too; fragments, because torch has many private variants
# (torch._scaled_dot_product_attention_math, torch.ops.aten._scaled_dot_product_flash_attention...)
# and the composite ones decompose before an operator-level check could see them. The same fragments
# as the static scan's (autograder/integrity/static_check.py ATTENTION_FRAGMENTS; the worker cannot import it,
# tests/test_static_check.py holds the two equal).
FORBIDDEN_FUNCTIONS = ("scaled_dot_product", "scaled_dot_attention", "multi_head_attention", "flash_attention",
                       "efficient_attention", "cudnn_attention", "fused_attention", "_transformer_encoder_layer",
                       "fused_sdp", "flex_attention")
FORBIDDEN_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product",  # _math, _flash_attention
                 # (_for_cpu), _efficient_attention, _cudnn_attention, _fused_attention_overrideable
                 "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd",
                 "aten::_fused_sdp_choice", "aten::_efficient_attention", "aten::_flash_attention",
                 "aten::_cudnn_attention", "aten::_triton_scaled_dot_attention", "aten::_triton_multi_head_attention",
                 "flex_attention")  # a higher-order operator (flex_attention, flex_attention_backward): no aten::
# The library attention modules: a class defined inside torch with one of these names, or any class
# derived from one (torch.nn.MultiheadAttention, torch.ao.nn.quantizable.MultiheadAttention, the
# quantized one, the Transformer family). The one list behind both run-time checks: the submodules of
# a constructed module (forbidden_submodules) and the module code that runs during a call (_ModuleWatch).
FORBIDDEN_MODULES = ("MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
                     "TransformerEncoderLayer", "TransformerDecoderLayer")
TORCH_DIR = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "")
# What the record says when the monitor did not see its own canary: the grader holds such a grade
# for review (grading.run_suites) instead of trusting a record that may have been switched off.
MONITOR_SILENT = "the forbidden-API monitor stopped reporting"
STAND_IN_MODULE = "grader_correct_versions"  # where the correct versions of error carried forward run


def library_attention_class(cls, names=FORBIDDEN_MODULES) -> type | None:
    """The library attention module class `cls` is or derives from (see FORBIDDEN_MODULES), else None."""
    return next((c for c in cls.__mro__ if c.__name__ in names
                 and isinstance(c.__module__, str) and c.__module__.startswith("torch.")), None)


def library_label(cls) -> str:
    """How a finding names a library module class: nn.MultiheadAttention, or its full name outside torch.nn."""
    if cls.__module__.startswith("torch.nn."):
        return f"nn.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


class ForbiddenApiMonitor(TorchFunctionMode):
    """Records forbidden torch functions and aten operators called while it is active.

    The lists are bound when this module is loaded (default arguments), before any submission
    runs: rebinding the module's names later (`executor.FORBIDDEN_FUNCTIONS = ()`) changes nothing.
    The record lives in the submission's process, so it cannot be trusted blindly: `check_canary`,
    called while the monitor is active after the student's code returns, runs one operation on a
    tensor only the monitor knows; if either mode did not see it (a mode popped off torch's stack, the
    monitor's methods replaced), the record says MONITOR_SILENT and the grader holds the grade for a
    person (the reason goes to `silent`, apart from the forbidden APIs in `used`). Switching the modes off only around a call (DisableTorchFunction) is left to the static
    scan, which holds any use of those switches.

    A library attention module computes with plain matmuls and softmax (the quantizable
    MultiheadAttention does), so no function or operator name gives it away: `_ModuleWatch`, a global
    module hook of torch's that lives only while the monitor is active, notes the library modules that
    run, and the canary proves that hook still fires too.

    The operators are recorded (`_OpRecorder`) only where library attention is not refused: in the
    grading worker (refuse_library_attention), a kernel of the grader's refuses and notes every
    operator the recorder would note, whatever modes are on and on any thread, and the refusal is
    checked after every call (refusal.Refusal.evidence). A Python dispatch mode seeing every operator
    of the forward and the backward would only repeat that, at about as much time as the call itself.
    """

    def __init__(self, functions=FORBIDDEN_FUNCTIONS, ops=FORBIDDEN_OPS):
        super().__init__()
        self.used = []    # forbidden APIs seen
        self.silent = []  # why the record cannot be vouched for (MONITOR_SILENT)
        self._functions = re.compile("|".join(map(re.escape, functions)))  # one C search per call, not ten
        self._ops = _OpRecorder(self.used, ops) if _refusal is None else None
        self._modules = _ModuleWatch(self.used)
        self._canary = None
        self.saw_canary = False

    def __enter__(self):
        self._modules.watch(below=_getframe(1))
        if self._ops is not None:
            self._ops.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            super().__exit__(*exc)
            if self._ops is not None:
                self._ops.__exit__(*exc)
        finally:
            self._modules.stop()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        __tracebackhide__ = True
        if self._canary is not None and args and args[0] is self._canary:
            self.saw_canary = True
        name = getattr(func, "__name__", "")
        if self._functions.search(name):
            _note(self.used, f"torch function {name}")
        caller = _getframe(0).f_back  # the code that called it (a tensor method, torch.bmm); None from C
        library = _library_class_running(caller) if caller is not None else None
        if library is not None:
            _note(self.used, f"torch module {library_label(library)}")
        return func(*args, **(kwargs or {}))

    def check_canary(self) -> None:
        """Run the canary through the modes and the module hook; note MONITOR_SILENT unless all saw it."""
        recorder = self._ops
        self._canary = torch.zeros(1)
        if recorder is not None:
            recorder.canary, recorder.saw_canary = self._canary, False
        self.saw_canary = self._modules.saw_canary = False
        torch.neg(self._canary)
        self._modules.canary(self._canary)
        if not (self.saw_canary and (recorder is None or recorder.saw_canary)):
            _note(self.silent, "its check operation was not recorded")
        if not self._modules.saw_canary:
            _note(self.silent, "torch's module hooks no longer run")
        self._canary = None
        if recorder is not None:
            recorder.canary = None


class _OpRecorder(TorchDispatchMode):
    # Higher-order operators (flex_attention) come here too, named by .name(); without this flag torch
    # refuses to run them under the mode at all, an error that would hide the reason from the student.
    supports_higher_order_operators = True

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
        name = func._schema.name if hasattr(func, "_schema") else func.name()
        if name.startswith(self._forbidden):
            _note(self.used, f"operator {name}")
        return func(*args, **(kwargs or {}))


class _ModuleWatch:
    """Notes the library attention modules (library_attention_class) whose code runs while it is
    active, however they were reached: called (by any name, through a mapping, functional_call), or
    their forward (or any other method of theirs, on any object) called directly, which skips the
    module's own call and its hooks. Such a method is seen on the stack when it calls a module, and by
    the monitor's function mode when it calls a torch function itself (its caller's frame). One torch
    global forward pre-hook, registered on entry and removed on exit, so a module an honest student
    runs outside the grader's calls (a comparison at import) is never seen.
    Its cost is one dictionary lookup per module call and per frame on the stack above the frame that
    started the watch (below it is the grader: the worker's loop, or pytest's deep stack in-process)."""

    def __init__(self, used):
        self.used = used
        self.canary = _CANARY_MODULE
        self.saw_canary = False
        self._handle = None
        self._floor = None

    def watch(self, below):
        """Start: `below` is the grader's frame that the student's code runs above."""
        self._floor = below
        self._handle = register_module_forward_pre_hook(self._before_forward)

    def stop(self):
        self._handle.remove()
        self._floor = None  # a frame kept alive would keep every local of the grader's call with it

    def _before_forward(self, module, args):
        if module is self.canary:
            self.saw_canary = True
            return
        cls = _CLASS_VERDICTS.get(type(module), _UNSEEN)
        if cls is _UNSEEN:
            cls = _CLASS_VERDICTS[type(module)] = library_attention_class(type(module))
        if cls is not None:
            _note(self.used, f"torch module {library_label(cls)}")
        frame, floor = _getframe(0).f_back, self._floor
        while frame is not None and frame is not floor:
            cls = _library_class_running(frame)
            if cls is not None:
                _note(self.used, f"torch module {library_label(cls)}")
            frame = frame.f_back


_UNSEEN = object()
_CANARY_MODULE = torch.nn.Identity()  # made once: a module's constructor costs more than the whole check
_CLASS_VERDICTS = {}  # type -> its library attention class or None, for every module type called
# id(code) -> (code, the library attention class it is a method of, or None), for every code seen on
# the stack: keyed by id because hashing a code object hashes its contents (about 4 times slower), and
# the code kept in the value so that its id is never reused for another one.
_CODE_VERDICTS = {}


def _library_class_running(frame) -> type | None:
    """The library attention class whose method `frame` runs, or None (remembered per code object)."""
    code = frame.f_code
    seen = _CODE_VERDICTS.get(id(code))
    if seen is None or seen[0] is not code:
        seen = _CODE_VERDICTS[id(code)] = (code, _library_class_of(frame))
    return seen[1]


def _library_class_of(frame) -> type | None:
    """The library attention class whose method (or a function nested in one) `frame` runs, found
    among the classes of the torch module the code belongs to."""
    code = frame.f_code
    if not code.co_filename.startswith(TORCH_DIR):
        return None
    module = sys.modules.get(frame.f_globals.get("__name__"))
    for value in list(getattr(module, "__dict__", {}).values()):
        library = library_attention_class(value) if isinstance(value, type) else None
        if library is not None and any(c is code for member in vars(value).values() for c in _codes(member)):
            return library
    return None


def _codes(member) -> list:
    """The code objects of a class member: a function's (and what it wraps, and its nested functions'),
    a static or class method's, a property's. Other members (names, classes, constants) have none."""
    if isinstance(member, (staticmethod, classmethod)):
        functions = [member.__func__]
    elif isinstance(member, property):
        functions = [member.fget, member.fset, member.fdel]
    else:
        functions = [member]
    found = []
    for function in functions:
        while isinstance(function, FunctionType) and all(function.__code__ is not c for c in found):
            found.append(function.__code__)
            function = function.__dict__.get("__wrapped__")  # functools.wraps
    for code in found:  # grows while it is read: nested functions, lambdas, comprehensions
        found.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return found


def _note(used, what):
    if what not in used:
        used.append(what)


# The shape trace: what a student reads under an error that a torch operation of theirs raised.
SHAPE_TRACE_HEADER = "Shapes of your tensors up to the error (most recent last):"
SHAPE_TRACE_ATTRIBUTE = "grader_shape_trace"  # where an exception carries its trace to the backend
SHAPE_TRACE_LINES = 7    # operations shown: with the header and the error, within check's 12 lines
SHAPE_TRACE_KEPT = 30    # operations remembered while a call runs (a ring: the oldest are dropped)
SHAPE_ERRORS = (RuntimeError, ValueError, IndexError)  # torch's size, broadcast, view, dimension errors
_OWN_FILE = _getframe(0).f_code.co_filename
_STACK_WALK = 16  # frames from an operation up to the student's line that called it (torch's in between)
_FAILED = object()
_NAMES = {"__getitem__": "[]", "__setitem__": "[]="}


class ShapeTrace(TorchFunctionMode):
    """Remembers, while a student's call runs, each torch operation their own code calls: its name, its
    tensor arguments' shapes (dtypes too where not floating point), its result's shape and the line of
    the submission that called it (an operation torch's own code runs, inside nn.Linear say, counts for
    the student's line that called into torch). Shapes only, never a tensor, in a ring of the last
    SHAPE_TRACE_KEPT: some microseconds per operation, about what the monitor itself costs.

    It sits on torch's function-mode stack *below* the ForbiddenApiMonitor, entered before it and left
    after it: every operation reaches the monitor first, exactly as without the trace (the monitor's
    caller frame, its canary and its module hook are unchanged), and then this mode, which only looks.
    It holds nothing the monitor relies on, so a submission that reaches it can change only its own
    trace. `explain` gives the text for an exception one of those operations raised (SHAPE_ERRORS), or a
    shape that did not unpack in the student's code."""

    def __init__(self, student_file):
        super().__init__()
        self._file = student_file if isinstance(student_file, str) else None
        self.entries = deque(maxlen=SHAPE_TRACE_KEPT)
        self._failed = None  # (id, type) of the exception the last failing operation raised

    def __torch_function__(self, func, types, args=(), kwargs=None):
        __tracebackhide__ = True
        kwargs = kwargs or {}
        frame = _student_frame(_getframe(1), self._file)
        if frame is None:
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except Exception as err:
            self._failed = (id(err), type(err))
            self._note(frame, func, args, kwargs, _FAILED)
            raise
        self._note(frame, func, args, kwargs, result)
        return result

    def _note(self, frame, func, args, kwargs, result):
        try:
            out = "error" if result is _FAILED else _describe(result, outputs=True)
            if type(out) is not tuple and _no_tensor_out(out):  # about half the operations: a size, a number
                return
            arguments = [_describe(a) for a in args] + [(k, _describe(v)) for k, v in kwargs.items()
                                                         if type(v) is torch.Tensor or type(v) is torch.nn.Parameter]
            if type(out) is tuple and _same_shape_out(arguments, out):
                return
            self.entries.append((frame.f_lineno, _function_name(frame), _op_name(func), arguments, out))
        except Exception:  # noqa: BLE001 - the trace is a help: it never changes what a call does
            pass

    def explain(self, err) -> str:
        """The trace to show under `err`, or "" when `err` is not a shape error it can speak to."""
        if not self.entries:
            return ""
        # Exact built-in types only, read without running any code of the student's (a class of theirs
        # could run some on isinstance, str or setattr, outside the monitor).
        if not any(type(err) is kind for kind in SHAPE_ERRORS):
            return ""
        raised_by_op = self._failed is not None and self._failed[0] == id(err) and self._failed[1] is type(err)
        unpacked = (type(err) is ValueError and len(err.args) == 1 and type(err.args[0]) is str
                    and "values to unpack" in err.args[0] and err.__traceback__ is not None
                    and _last_frame(err.__traceback__).f_code.co_filename == self._file)
        if not (raised_by_op or unpacked):
            return ""
        file = os.path.basename(self._file)
        shown = list(self.entries)[-SHAPE_TRACE_LINES:]
        width = max(len(f"{file}:{entry[0]}") for entry in shown)
        lines = [SHAPE_TRACE_HEADER]
        for line, function, name, arguments, out in shown:
            where = f"{file}:{line}".ljust(width)
            lines.append(f"  {where}  {function}: {_call_text(name, arguments)} -> {_text(out)}"[:200])
        return "\n".join(lines)

    def attach(self, err) -> None:
        """Give `err` its trace (SHAPE_TRACE_ATTRIBUTE), where it has one; the backend shows it."""
        try:
            text = self.explain(err)
            if text:
                setattr(err, SHAPE_TRACE_ATTRIBUTE, text)
        except Exception:  # noqa: BLE001 - an exception that takes no attribute simply has no trace
            pass


def shape_trace_of(err) -> str:
    """The shape trace ShapeTrace.attach gave `err`, or "" (read without running code of the student's)."""
    if not any(type(err) is kind for kind in SHAPE_ERRORS):
        return ""
    text = vars(err).get(SHAPE_TRACE_ATTRIBUTE)
    return text if type(text) is str else ""


def _student_frame(frame, student):
    """The submission's frame that called the operation (through torch's own code and this module's
    modes), or None when the grader or another library called it."""
    for _ in range(_STACK_WALK):
        if frame is None:
            return None
        name = frame.f_code.co_filename
        if name == student:
            return frame
        if name != _OWN_FILE and not name.startswith(TORCH_DIR):
            return None
        frame = frame.f_back
    return None


def _last_frame(tb):
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame


def _function_name(frame) -> str:
    """`split_heads`, `MultiHeadSelfAttention.forward`; a comprehension by the function around it."""
    code = frame.f_code
    for _ in range(3):
        if not code.co_name.startswith("<") or frame.f_back is None or frame.f_back.f_code.co_filename != code.co_filename:
            break
        frame = frame.f_back
        code = frame.f_code
    qualified = getattr(code, "co_qualname", code.co_name)
    return code.co_name if "<locals>" in qualified else qualified


def _op_name(func) -> str:
    name = getattr(func, "__name__", None)
    if name in ("__get__", "__set__"):  # a property of a tensor (x.T, x.mT)
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    if type(name) is not str:
        return "?"
    return _NAMES.get(name, name.strip("_") or name)


def _describe(value, outputs=False, depth=0):
    """What the trace keeps of an argument or a result: a plain tensor's (shape, dtype), plain small
    values. Decided on the exact type, with no code of the value's own run (a class of the student's
    could run some on isinstance, ==, len or indexing while the monitor above is off the stack)."""
    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        return (tuple(value.shape), value.dtype)
    if depth == 0 and (kind is list or issubclass(kind, tuple)):  # a tuple: torch.Size, torch.return_types.max
        items = list.__getitem__(value, slice(0, 5)) if kind is list else tuple.__getitem__(value, slice(0, 5))
        described = [_describe(v, outputs, 1) for v in items]
        return [*described, "..."] if (list.__len__(value) if kind is list else tuple.__len__(value)) > 5 else described
    if outputs:
        return None  # a result that is not a tensor (a size, a number): nothing to show
    if value is None or value is Ellipsis or kind is bool or kind is int:
        return value
    if kind is slice:
        return slice(*(v if v is None or type(v) is int else "?" for v in (value.start, value.stop, value.step)))
    if kind is float:
        return "float"  # a number, which may come from the test's data: its kind only
    if kind is str:
        return repr(value[:40])
    if kind is torch.dtype:
        return str(value).removeprefix("torch.")
    if issubclass(kind, torch.Tensor):  # a subclass: its own code would run to read its shape
        return "tensor"
    return "..."


# What the trace leaves out, as nothing about shapes to tell: an operation that gave no tensor (checked
# first, on the result alone, before the arguments are described: about half the operations of a call),
# or one tensor in that gave one tensor of the same shape and dtype out (x.float(), softmax, a scaling).

def _no_tensor_out(out) -> bool:
    """`out` (described, not one tensor) holds no tensor: several results without one, or none."""
    return out is None or (type(out) is list and not any(type(o) is tuple for o in out))


def _same_shape_out(arguments, out) -> bool:
    """One tensor argument, described as the one tensor that came out (`out`)."""
    tensor = None
    for argument in arguments:
        if type(argument) is tuple and type(argument[0]) is str:  # a keyword argument
            argument = argument[1]
        if type(argument) is tuple and type(argument[1]) is torch.dtype:
            if tensor is not None:
                return False
            tensor = argument
    return tensor == out


def _is_tensor(described) -> bool:
    return type(described) is tuple and len(described) == 2 and type(described[1]) is torch.dtype


def _call_text(name, arguments) -> str:
    dtypes = {a[1] for a in arguments if _is_tensor(a)}
    shown = [_text(a, mixed=len(dtypes) > 1) for a in arguments]
    if name in ("[]", "[]=") and shown:
        index = arguments[1] if len(arguments) > 1 else None
        inside = ", ".join(_index_text(i) for i in index) if type(index) is list else _index_text(index)
        return f"{shown[0]}[{inside}]" + (f" = {shown[2]}" if name == "[]=" and len(shown) > 2 else "")
    return f"{name}({', '.join(shown)})"


def _text(described, mixed=False) -> str:
    if _is_tensor(described):
        shape, dtype = described
        dims = f"({shape[0]},)" if len(shape) == 1 else str(shape)
        return dims if dtype.is_floating_point and not mixed else f"{dims} {str(dtype).removeprefix('torch.')}"
    if type(described) is list:
        return f"({_text(described[0])},)" if len(described) == 1 else f"({', '.join(map(_text, described))})"
    if type(described) is tuple and len(described) == 2 and type(described[0]) is str:  # a keyword argument
        return f"{described[0]}={_text(described[1])}"
    if type(described) is slice:
        return _index_text(described)
    return "..." if described is Ellipsis else str(described)


def _index_text(index) -> str:
    if type(index) is slice:
        parts = ["" if v is None else str(v) for v in (index.start, index.stop, index.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
    return _text(index)


def forbidden_submodules(module):
    return [f"{library_label(library_attention_class(type(m)))} at '{name or 'self'}'"
            for name, m in module.named_modules() if library_attention_class(type(m)) is not None]


def execute(submission, call: dict, watched: bool = True) -> dict:
    """Runs `call` against the module object `submission`; exceptions propagate to the caller.
    `watched`: under the monitor and the shape trace (_monitored), as every submission's call runs;
    False only for code the grader trusts (the reference solution), which they would only slow down."""
    __tracebackhide__ = True  # in-process under pytest: the student reads their own frames only
    target = getattr(submission, call["target"], None)
    if target is None:
        raise AttributeError(f"your mhsa.py defines no '{call['target']}'")
    student_file = vars(submission).get("__file__")  # their frames' file (read from the dict: no student code runs)
    with standing_in(submission, call.get("stand_ins", ""), call["target"]):
        return _execute(target, call, student_file, watched)


@contextlib.contextmanager
def standing_in(submission, source: str, target: str):
    """The grader's correct versions (`source`, sent by autograder/record/carry_forward.py) in place of the
    submission's functions of the same names while the call runs, never the call's `target` itself:
    every module-level name bound to the student's own object is rebound, aliases included, so that
    code which calls it (a MultiHeadSelfAttention calling scaled_dot_product_attention) runs with a
    correct one. The submission's namespace is restored afterwards, whatever the call did."""
    if not source:
        yield
        return
    correct = {"__name__": STAND_IN_MODULE}
    exec(compile(source, STAND_IN_MODULE, "exec", dont_inherit=True), correct)  # noqa: S102
    namespace = vars(submission)
    saved = dict(namespace)
    for name, version in correct.items():
        defined_there = getattr(version, "__module__", None) == STAND_IN_MODULE  # not an import, not a helper
        if not defined_there or name.startswith("_") or name == target:
            continue
        own = saved.get(name)
        for key, value in saved.items():
            if own is not None and value is own:
                namespace[key] = version
        namespace[name] = version
    try:
        yield
    finally:
        namespace.clear()
        namespace.update(saved)


def _execute(target, call: dict, student_file=None, watched=True) -> dict:
    __tracebackhide__ = True
    args, kwargs = list(call.get("args", ())), dict(call.get("kwargs", {}))
    result = {"output": None, "input_grads": {}, "param_grads": {}, "attributes": {}, "mutated": [],
              "forbidden": [], "monitor_silent": []}
    seed_cpu(call.get("seed", 0))
    monitor = ForbiddenApiMonitor() if watched else None
    fn = target
    if call.get("init") is not None:
        def construct():
            __tracebackhide__ = True
            return target(**call["init"])

        fn = _monitored(monitor, construct, ShapeTrace(student_file))
        if fn is _RAISED_AFTER_FORBIDDEN:
            return _with_findings(result, monitor)
        if call.get("dtype") is not None:
            fn = fn.to(call["dtype"])
        if call.get("state") is not None:
            fn.load_state_dict(call["state"], strict=True)
        fn.train(bool(call.get("training", False)))
        result["attributes"] = describe(fn)
        result["forbidden"].extend(forbidden_submodules(fn))
        if call.get("construct_only"):
            return _with_findings(result, monitor)

    backward = call.get("grad_outputs") is not None
    named = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
    if backward:
        for name, a in named.items():
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a.requires_grad_(True)
    before = {name: a.detach().clone() for name, a in named.items() if isinstance(a, torch.Tensor)}

    def forward_and_backward():
        __tracebackhide__ = True
        out = fn(*args, **kwargs)
        if backward:
            outputs = [t for t in _tensors(out) if t.requires_grad]
            grads = _tensors(call["grad_outputs"])[:len(outputs)]
            if outputs:
                torch.autograd.backward(outputs, grads)
        return out

    out = _monitored(monitor, forward_and_backward, ShapeTrace(student_file))
    if out is _RAISED_AFTER_FORBIDDEN:
        return _with_findings(result, monitor)
    result["output"] = out
    result["mutated"] = [name for name, old in before.items() if not same_bits(named[name].detach(), old)]
    if backward:
        result["input_grads"] = {name: a.grad for name, a in named.items()
                                 if isinstance(a, torch.Tensor) and a.is_floating_point()}
        if isinstance(fn, torch.nn.Module):
            result["param_grads"] = {name: p.grad for name, p in fn.named_parameters()}
    return _with_findings(result, monitor)


def _with_findings(result: dict, monitor) -> dict:
    """`result` with what the monitor found (None: no monitor ran): the forbidden APIs used, and why
    it cannot vouch for them."""
    if monitor is not None:
        result["forbidden"].extend(monitor.used)
        result["monitor_silent"].extend(monitor.silent)
    return result


_RAISED_AFTER_FORBIDDEN = object()


def _monitored(monitor, step, trace):
    """step()'s value, run under the monitor and followed by its canary; _RAISED_AFTER_FORBIDDEN when
    step raised after using a forbidden API, whose finding is then the reply: it is what the student
    must read, not the error it led to (flex_attention under the grader's modes raises in torch.compile).
    The shape trace (ShapeTrace) is entered first, so that the monitor is above it on torch's stack and
    sees every operation first; an error step raised leaves with its trace attached. With no monitor
    (trusted code: execute's `watched`), step() alone."""
    __tracebackhide__ = True
    if monitor is None:
        return step()
    _refusals[0] = monitor.used
    try:
        with trace, monitor:
            try:
                value = step()
            finally:
                _refusals[0] = None
                for line in _refusal.evidence() if _refusal is not None else ():
                    _note(monitor.silent, line)
            monitor.check_canary()
    except Exception as err:
        if not (monitor.used or monitor.silent):
            trace.attach(err)
            raise
        return _RAISED_AFTER_FORBIDDEN
    return value


_refusal = None  # the worker's refusal of library attention (refusal.Refusal); in-process there is none
_refusals = [None]  # the findings list of the call that runs, where a refusal is noted


def refuse_library_attention(refused) -> None:
    """Every later call runs with library attention refused (refusal.start), and checks after it
    that the refusal is still in place."""
    global _refusal
    _refusal = refused


def note_refused(what: str) -> None:
    """A refusal of library attention (refusal.py), noted as a finding of the call that runs."""
    if _refusals[0] is not None:
        _note(_refusals[0], what)


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
