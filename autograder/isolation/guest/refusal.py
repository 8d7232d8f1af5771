"""Library attention refused in the grading worker where torch runs it, not where Python calls it.

The forbidden-API monitor (executor.ForbiddenApiMonitor) watches calls through torch's modes, which
are thread-local and which Python can switch off around a call (torch._C.DisableTorchFunction); a
builtin handed to functools.partial or map even runs with no Python event at all. So once the
submission is imported, the worker does not only watch library attention; it takes it away:

- every attention operator of torch's dispatcher, in any namespace (`is_attention_operator`:
  aten::scaled_dot_product_attention, its math, flash, efficient and cuDNN kernels, the native
  multi-head attention, the fused encoder layer, onnx::Attention ...) gets, at every dispatch key
  where it has a kernel, a kernel of the grader's that refuses. The dispatcher runs it whatever the
  caller did: any name or route, torch's modes on or off, any thread, inference mode, vmap.
- torch's attention written in Python (`attention_functions`: every function of torch's whose name
  says attention or sdpa, or that computes a softmax without being a softmax itself, such as
  F.multi_head_attention_forward, flex attention's math, the ONNX attention's reference code, the
  compiler's attention patterns; and every function of nn.MultiheadAttention, the Transformer
  classes and their quantized and quantizable versions) is replaced in place: the function objects
  keep their identity, so every reference to them, in a module, a table or a closure, refuses. The
  functions are found among the interpreter's live objects, not by a list of modules, and a torch
  module imported later is searched when its import ends (`ImportWatch`).

A refusal raises a RuntimeError that names what was refused, and notes it (`note`) so that the part
that called it is zeroed with the assignment's reason; even if that record were lost, the library
computed nothing for the submission.

The refusal starts after the import, so that an honest file that compares its attention with
torch's at import time still imports. What the import could take to run later is the original code
of those Python functions (the operators leave nothing to take): reading such a function's `__code__`
is seen by an audit hook installed before the import (`watch_code`), and is evidence that holds the
grade, as is anything put back after a call (`Refusal.evidence`).

What this does not take away: attention computed by native code of the submission's own (ctypes:
held by the static scan), and torch's Python source copied as text and compiled (that is the
submission's own code, as any copied code is: the similarity check's concern, not this one's).
"""
import gc
import importlib.abc
import os
import secrets
import sys
import warnings
from types import CodeType, FunctionType

import torch

TORCH_DIR = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "")
REFUSAL = ("{what} is refused in the grader's worker: this assignment forbids library attention "
           "(implement attention yourself with matmul, softmax and friends)")
NOTE_NAME = "_mhsa_grader_refused"  # the name a replaced function calls to note its refusal
# What names a function or an operator as attention (with the monitor's fragments).
ATTENTION_WORDS = ("attention", "sdpa", "sfdp")
# The softmax a function of torch's computes when it computes attention; a function whose own name
# says softmax (or softmin) is the softmax itself (F.softmax, nn.Softmax.forward), which students use.
SOFTMAX_NAMES = frozenset({"softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax", "softmax_"})
SOFTMAX_ITSELF = ("softmax", "softmin")
# Where the dispatcher says the refusing kernels come from (torch 2.4 and later): this file, with a
# token drawn per worker, so that a kernel registered by other code under this file's name reads
# otherwise in the dispatcher's entry.
_REGISTERED_AT = f"{__file__}#{secrets.token_hex(8)}"


def is_attention_operator(name: str, prefixes) -> bool:
    """Whether the dispatcher's operator `name` (namespace::name.overload) is an attention: one the
    monitor names (`prefixes`, executor.FORBIDDEN_OPS), or any whose name says attention."""
    return name.startswith(prefixes) or any(w in name.split("::", 1)[-1].lower() for w in ATTENTION_WORDS)


def attention_functions(fragments, library_class, label, verdicts: dict, known: dict) -> list:
    """(function, how a finding names it) for each of torch's live Python functions that computes
    attention and is not in `known` (id(function) -> (function, ...)). Found through gc, so that a
    function held only in a table or an object (a custom operator's definition, a decomposition
    table), or a copy made from another's code, is found as one in a module is. `verdicts`
    (id(code) -> (code, how it is named or "")) keeps what each code was judged, updated here.
    `fragments`: the monitor's name fragments; `library_class(cls)`, `label(cls)`: torch's library
    attention classes."""
    classes = {}
    found = []
    for function in [f for f in gc.get_objects() if type(f) is FunctionType]:
        code = function.__code__
        verdict = verdicts.get(id(code))
        if verdict is None or verdict[0] is not code:
            what = _attention_label(function, fragments, library_class, label, classes) \
                if code.co_filename.startswith(TORCH_DIR) else ""
            verdict = verdicts[id(code)] = (code, what)
        entry = known.get(id(function))
        if verdict[1] and (entry is None or entry[0] is not function):
            found.append((function, verdict[1]))
    return found


def _attention_label(function, fragments, library_class, label, classes) -> str:
    qualified = function.__qualname__
    owner = sys.modules.get(function.__module__) if isinstance(function.__module__, str) else None
    if "." in qualified and owner is not None:
        cls = owner.__dict__.get(qualified.split(".", 1)[0])
        if isinstance(cls, type):
            if cls not in classes:
                classes[cls] = issubclass(cls, torch.nn.Module) and library_class(cls) is cls
            if classes[cls]:
                return f"torch module {label(cls)}"
    lowered = qualified.lower()
    if any(w in lowered for w in SOFTMAX_ITSELF):
        return ""
    if any(w in lowered for w in ATTENTION_WORDS) or any(f in lowered for f in fragments):
        return f"torch function {qualified}"
    if any(SOFTMAX_NAMES & set(code.co_names) for code in _codes(function.__code__)):
        return f"torch function {qualified}"
    return ""


def _codes(code) -> list:
    found = [code]
    for each in found:  # grows while it is read: nested functions, lambdas, comprehensions
        found.extend(c for c in each.co_consts if isinstance(c, CodeType))
    return found


def watch_code(refusal: "Refusal", own_files, student_file: str):
    """An audit hook (Python offers no way to remove one), installed before the submission is
    imported, that notes in `refusal.code_read` how the submission could keep torch's attention for
    later: reading the code of a function the refusal will replace (`__code__`, or gc's referents of
    the function), or torch generating Python code (torch.fx, TorchScript, the compiler) while the
    submission's code runs, which replays what it traced below the refusal and the scan. A walk of
    gc's objects also makes the refusal judge the live functions again when it starts (a copy made
    from a function's code is then refused too). The worker's own files (`own_files`) are exempt."""
    getframe = sys._getframe
    watched, evidence = refusal.watched, refusal.code_read

    def note(line):
        if line not in evidence:
            evidence.append(line)

    def generated_for_the_submission() -> bool:
        """Whether the submission's code is on the stack and no torch module is being imported
        between it and the event (a module of torch's that builds code as it loads is torch's own)."""
        frame = getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename == student_file:
                return True
            if code.co_name == "<module>" and code.co_filename.startswith(TORCH_DIR):
                return False
            frame = frame.f_back
        return False

    def hook(event, args):
        if event == "object.__getattr__":
            if args[1] == "__code__":
                entry = watched.get(id(args[0]))
                if entry is not None and entry[0] is args[0] and \
                        not getframe(1).f_code.co_filename.startswith(own_files):
                    note(f"the submission read the code of {entry[1]}, which the grader refuses")
        elif event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            if getframe(1).f_code.co_filename.startswith(own_files):
                return  # the refusal judging the live functions
            refusal.walked = True
            for found in args[0] if event == "gc.get_referents" else ():
                entry = watched.get(id(found))
                if entry is not None and entry[0] is found:
                    note(f"the submission reached the code of {entry[1]} through gc, which the grader refuses")
        elif event == "compile":
            caller = getframe(1)
            if caller is not None and caller.f_code.co_filename.startswith(TORCH_DIR) and generated_for_the_submission():
                module = caller.f_globals.get("__name__", "torch")
                note(f"torch generated Python code ({module}) while the submission ran: what it traced "
                     "runs below the grader's refusal of library attention")
    return hook


class Refusal:
    """The refusal of one worker: what it refused, and whether it is still in place."""

    def __init__(self, note, prefixes, fragments, library_class, label):
        self._note = note
        self._prefixes = prefixes
        self._judge = (fragments, library_class, label)
        self.watched = {}            # id(function) -> (function, how it is named, its refusing code)
        self.code_read = []          # watch_code's lines
        self._verdicts = {}          # id(code) -> (code, how it is named or ""): every function's code judged
        self.walked = False          # whether gc walked the objects since the functions were judged
        self._replaced = []          # (function, the refusing code it must keep, how it is named)
        self._operators = set()      # the operators refused
        self._entries = {}           # operator -> its dispatcher entry once refused (one per namespace)
        self._libraries = {}         # namespace -> the dispatcher library its refusals are registered in
        self._modules = 0            # how many torch modules were loaded when functions were last judged
        self._keys = {}              # operator -> the dispatch keys where it has a kernel (judged once)
        self.import_watch = ImportWatch(self.extend)

    def find(self) -> None:
        """Judge the functions alive now, so that watch_code sees them: a walk of every live function
        (some 0.1 s warm, 0.5 s cold), done again only when torch modules were imported or gc walked
        the objects since the last one."""
        loaded = sum(1 for name in list(sys.modules) if name.startswith("torch"))
        if loaded == self._modules and not self.walked:
            return
        self._modules, self.walked = loaded, False
        for function, what in attention_functions(*self._judge, self._verdicts, self.watched):
            code = _refusing_code(function.__code__, REFUSAL.format(what=what), what)  # made now, put in later
            self.watched[id(function)] = (function, what, code)

    def extend(self) -> None:
        """Refuse every attention operator and every attention function of torch's not yet refused."""
        self.find()
        done = {id(f) for f, _, _ in self._replaced}
        for function, what, code in list(self.watched.values()):
            if id(function) not in done and code is not None:
                function.__globals__[NOTE_NAME] = self._note
                function.__code__ = code
                self._replaced.append((function, code, what))
        with warnings.catch_warnings():  # torch warns that a kernel is overridden: that is the point,
            warnings.simplefilter("ignore")  # and it would reach the submission's printed output
            for name in torch._C._dispatch_get_all_op_names():
                if name not in self._operators and is_attention_operator(name, self._prefixes):
                    self._refuse_operator(name)
        # One operator of each namespace, its dispatcher entry as it reads now: a library's
        # registrations are undone all together, and the entry then reads otherwise.
        # Kept from the first time: what a later import (or a reset) does must not become the reference.
        checked = {name.split("::", 1)[0] for name in self._entries}
        for name in sorted(self._operators):
            if name.split("::", 1)[0] not in checked:
                checked.add(name.split("::", 1)[0])
                self._entries[name] = torch._C._dispatch_dump(name)

    def _refuse_operator(self, name) -> None:
        kernel = _refusing_kernel(self._note, name)
        namespace, rest = name.split("::", 1)
        if namespace not in self._libraries:
            # torch._C._dispatch_library rather than torch.library.Library: the latter keeps every
            # library in weakref.finalize's registry, where any Python code could find it and undo it.
            self._libraries[namespace] = torch._C._dispatch_library("IMPL", namespace, "", _REGISTERED_AT, 0)
        library = self._libraries[namespace]
        for key_name in self._keys_of(name):
            try:
                try:
                    library.impl(rest, key_name, kernel, False)
                except TypeError:  # torch before 2.4: (name, the key itself, the kernel)
                    library.impl(rest, torch._C.DispatchKey.__members__[key_name], kernel)
            except RuntimeError:
                continue  # a key that takes no kernel from Python: the others still refuse
            self._operators.add(name)

    def find_operator_keys(self) -> None:
        """Look up, once, the dispatch keys of every attention operator registered now, so that
        putting the refusal in force after the import costs milliseconds."""
        for name in torch._C._dispatch_get_all_op_names():
            if is_attention_operator(name, self._prefixes):
                self._keys_of(name)

    def _keys_of(self, name) -> list:
        if name not in self._keys:
            self._keys[name] = [key_name for key_name, key in torch._C.DispatchKey.__members__.items()
                                if not key_name.startswith("EndOf")
                                and torch._C._dispatch_has_kernel_for_dispatch_key(name, key)]
        return self._keys[name]

    def evidence(self) -> list:
        """Why the refusal cannot be vouched for: code read before it started, or torch's own put
        back since (a function's code, an operator whose dispatcher entry reads otherwise than when
        it was refused: about 25 microseconds an operator), or the import watch taken off."""
        put_back = [] if self._codes_in_place() else [
            f"{what} runs other code than the grader's refusal"
            for function, code, what in self._replaced if function.__code__ is not code]
        put_back += [f"operator {name} runs other kernels than the grader's refusal"
                     for name, entry in self._entries.items() if torch._C._dispatch_dump(name) != entry]
        if not self.import_watch.in_place():
            put_back.append("the grader's watch on torch's imports was taken off")
        return self.code_read + put_back


    def _codes_in_place(self) -> bool:
        """Whether every replaced function still runs its refusing code, read in one call: gc's
        referents of all the functions, in their order. Each function refers to its own code and,
        when the count of code objects is one per function, to no other, so the i-th code is the
        i-th function's. Reading each `__code__` instead runs the audit hooks once per function, some
        0.2 ms after every call; a count that differs (a code object kept in a function's attributes)
        leaves the answer to that exact reading."""
        codes = [r for r in gc.get_referents(*(f for f, _, _ in self._replaced)) if type(r) is CodeType]
        return len(codes) == len(self._replaced) and all(
            found is code for found, (_, code, _) in zip(codes, self._replaced))


class ImportWatch(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: when an import of a torch module ends, `extend()` refuses what it
    brought (a module of torch's attention, an operator it registers)."""

    def __init__(self, extend):
        self._extend = extend
        self._depth = 0

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    def in_place(self) -> bool:
        return any(finder is self for finder in sys.meta_path)

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("torch") or self._depth:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Extending(spec.loader, self)
                return spec
        return None


class _Extending(importlib.abc.Loader):
    """A loader that runs the real one, then refuses what the import brought."""

    def __init__(self, loader, watch):
        self._loader, self._watch = loader, watch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._watch._depth += 1
        try:
            self._loader.exec_module(module)
        finally:
            self._watch._depth -= 1
        self._watch._extend()


def prepare(note, prefixes, fragments, library_class, label) -> Refusal:
    """The worker's Refusal, its functions judged before any submission runs (the worker template
    does it once), not yet in force."""
    refusal = Refusal(note, prefixes, fragments, library_class, label)
    refusal.find()
    refusal.find_operator_keys()
    return refusal


def start(refusal: Refusal) -> Refusal:
    """Put the refusal in force (after the submission's import)."""
    refusal.extend()
    refusal.import_watch.install()
    return refusal


def _refusing_kernel(note, name):
    message = REFUSAL.format(what=f"operator {name}")

    def refuse(*args, **kwargs):
        note(f"operator {name}")
        raise RuntimeError(message)
    return refuse


def _refusing_code(original: CodeType, message: str, what: str) -> CodeType | None:
    """A code object that notes `what` and raises `message`, with the same free variables as
    `original` (a method that uses super() has one), so that it can replace it in place."""
    free = original.co_freevars
    outer = "".join(f"    {name} = None\n" for name in free)
    uses = f"        ({', '.join(free)},)\n" if free else ""
    source = (f"def _outer():\n{outer}    def {original.co_name}(*args, **kwargs):\n{uses}"
              f"        {NOTE_NAME}({what!r})\n        raise RuntimeError({message!r})\n"
              f"    return {original.co_name}\n")
    namespace = {}
    exec(compile(source, original.co_filename, "exec"), namespace)  # noqa: S102 - the grader's own text
    code = namespace["_outer"]().__code__
    return code if code.co_freevars == free else None
