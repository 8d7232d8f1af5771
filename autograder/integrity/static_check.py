"""The assignment's rule, no library attention, read from the source (never run), by rubric part.

The scan is a grading rule, not a security boundary (the operating system contains what a submission
does: autograder/isolation/guest/confine.py). It gives two kinds of finding:

  - "forbidden": a plain use of a library attention (F.scaled_dot_product_attention,
    nn.MultiheadAttention, F.multi_head_attention_forward, torch._native_multi_head_attention, every
    aten sdpa variant ...). It zeroes the part that uses it, with the reason.
  - "review": something the grader cannot decide, so a person must: dynamic reach into private or
    dispatch internals (torch._C, torch.ops, torch.library/hub/package, the switches that turn
    torch's function and dispatch modes off, ctypes, importlib, marshal, sys.modules, frames,
    __dict__/__globals__/__subclasses__), an attribute name computed at run time (getattr,
    operator.attrgetter, an alias of either), code built at run time (exec, eval, compile, a file
    written and then imported), a coding line or bytes that are not UTF-8, and a file the scan cannot
    read to the end. Such a grade is held for review (grading.hold_for_review), never silently zeroed
    and never silently full.

Imports are not a rule: any module may be imported, and none costs points by itself; only the
modules whose purpose is dynamic reach (ctypes, importlib, marshal ...) hold a grade; honest use of
pickle (saving weights), gc and inspect's member listings is not held: the worker's run-time refusal
of library attention (autograder/isolation/guest/refusal.py) decides what they could have reached. The scan fails
closed: an exception inside it is a "review" finding, never "no findings".

What honest code does stays clean: a computed getattr checked against literal names first, a module
bound to another name (`m = torch.nn.functional`: followed, not refused), `self.__class__.__name__`,
`if __name__ == "__main__":`, `from __future__ import annotations`, extra imports of any kind.
"""
import ast
import io
import re
import tokenize
from dataclasses import dataclass

FORBIDDEN = "forbidden"  # zeroes the part
REVIEW = "review"        # holds the grade for a person

# Public library attentions by name; every private variant is matched by ATTENTION_FRAGMENTS.
FORBIDDEN_NAMES = {
    "MultiheadAttention": "nn.MultiheadAttention",
    "multi_head_attention_forward": "F.multi_head_attention_forward",
    "scaled_dot_product_attention": "F.scaled_dot_product_attention",
    "Transformer": "nn.Transformer", "TransformerEncoder": "nn.TransformerEncoder",
    "TransformerEncoderLayer": "nn.TransformerEncoderLayer", "TransformerDecoder": "nn.TransformerDecoder",
    "TransformerDecoderLayer": "nn.TransformerDecoderLayer",
    "flex_attention": "torch.nn.attention.flex_attention",
}
# torch._native_multi_head_attention, torch._transformer_encoder_layer_fwd, torch._triton_*, and the
# aten sdpa kernels: _scaled_dot_product_attention_math, _scaled_dot_product_flash_attention(_for_cpu),
# _scaled_dot_product_efficient_attention, _scaled_dot_product_cudnn_attention,
# _scaled_dot_product_fused_attention_overrideable, _efficient_attention_forward,
# _flash_attention_forward, _fused_sdp_choice, flex attention's private helpers ... The run-time monitor
# matches the same fragments (autograder/isolation/guest/executor.py FORBIDDEN_FUNCTIONS: the worker imports that
# module without this one; tests/test_static_check.py holds the two equal).
ATTENTION_NAME_FRAGMENTS = ("scaled_dot_product", "scaled_dot_attention", "multi_head_attention", "flash_attention",
                            "efficient_attention", "cudnn_attention", "fused_attention", "_transformer_encoder_layer",
                            "fused_sdp", "flex_attention")
ATTENTION_FRAGMENTS = re.compile("|".join(ATTENTION_NAME_FRAGMENTS))

# Attribute names that only serve to reach torch's internals or the interpreter's, on any object.
INTERNALS = {"_C": "torch._C", "ops": "torch.ops", "_ops": "torch._ops", "aten": "torch.ops.aten",
             "overrides": "torch.overrides", "_python_dispatch": "torch.utils._python_dispatch",
             "ctypes": "ctypes", "ctypeslib": "numpy.ctypeslib", "_getframe": "sys._getframe",
             "library": "torch.library", "hub": "torch.hub", "package": "torch.package",
             "_dynamo": "torch._dynamo", "_decomp": "torch._decomp", "_refs": "torch._refs",
             "_prims": "torch._prims",
             # Code that never appears in the source: compiled from a string or loaded from bytes
             # (TorchScript runs below the monitor's modes), or evaluated from an annotation string.
             # (An unpickling is not held: what it could return, a library attention, the worker
             # refuses at run time; see autograder/isolation/guest/refusal.py.)
             "jit": "torch.jit", "CompilationUnit": "torch.jit.CompilationUnit",
             "marshal": "marshal", "get_type_hints": "typing.get_type_hints", "ForwardRef": "typing.ForwardRef",
             "_eval_type": "typing._eval_type", "get_annotations": "inspect.get_annotations",
             "importlib": "importlib", "builtins": "builtins"}
# ... and of these modules only (`sys.modules`; `self.modules()` and `torch.stack` are ordinary).
# Frames reach the grader's running code (the worker's call loop below the submission's frames).
# gc's object walks and inspect's member listings are not held: what they could reach to switch the
# run-time check off, the worker checks after every call (refusal.Refusal.evidence).
MODULE_INTERNALS = {"sys": {"modules", "meta_path", "path_hooks", "settrace", "setprofile"},
                    "inspect": {"currentframe", "stack", "getouterframes", "getinnerframes", "trace"}}
# What switches torch's function and dispatch modes off, or installs one: the run-time monitor is a
# pair of such modes (DisableTorchFunction, _DisableTorchDispatch, _disable_current_modes, _pop_mode ...).
MODE_SWITCHES = re.compile(r"Disable|_disable_current_modes|_pop_mode|_push_mode|_set_torch_function_mode"
                           r"|torch_function|torch_dispatch|TorchFunction|TorchDispatch|DispatchKey|DispatchMode"
                           r"|_AutoDispatch|python_dispatch|_mode_stack")
# Modules whose purpose is dynamic reach into the interpreter or running code of another origin.
REACH_MODULES = {"ctypes", "_ctypes", "cffi", "importlib", "imp", "_imp", "zipimport", "marshal", "runpy", "code",
                 "codeop", "builtins", "__main__", "executor", "worker_main", "refusal", "copyreg", "pydoc",
                 "pkgutil", "doctest", "pdb", "bdb", "cProfile", "profile", "trace"}
# Built-in names that run code or reach namespaces by name.
REACH_NAMES = {"__import__", "exec", "eval", "compile", "__builtins__", "__loader__", "__spec__", "vars", "globals",
               "locals", "breakpoint"}
# Dunder attributes that reach namespaces, code or the class graph; every other dunder
# (`self.__class__.__name__`, `super().__init__`) is ordinary.
REACH_DUNDERS = {"__dict__", "__globals__", "__subclasses__", "__builtins__", "__code__", "__closure__",
                 "__mro__", "__bases__", "__base__", "__getattribute__", "__import__", "__loader__", "__spec__",
                 "__self__", "__func__", "__wrapped__", "__reduce__", "__reduce_ex__", "__defaults__",
                 "__kwdefaults__", "__traceback__", "__torch_function__", "__torch_dispatch__", "__objclass__"}
FRAME_ATTRIBUTES = {"tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame",
                    "cr_frame", "ag_frame", "gi_code", "co_code", "func_globals"}
# Calls that read an attribute by a name given as a string (setattr and delattr write: only on a module).
NAME_READS = {"getattr", "hasattr", "attrgetter", "methodcaller"}
NAME_WRITES = {"setattr", "delattr"}
UTF8 = {"utf-8", "utf8", "utf_8", "utf-8-sig"}
CODING_LINE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
WRITE_MODES = re.compile(r"[wax+]")
WRITES_A_FILE = "writes a file and changes where Python imports from (code written and then imported escapes the grader's scan)"
FILE_CHANGERS = {"copy", "copy2", "copyfile", "copytree", "move", "rename", "replace", "link", "symlink", "renames"}
UNKNOWN_OBJECT = "?"  # what _attribute is told an attrgetter reads from: anything, a module included


@dataclass(frozen=True)
class Finding:
    line: int
    function: str | None  # the top-level function or class it sits in; None at module level
    message: str
    kind: str = FORBIDDEN  # FORBIDDEN zeroes the part; REVIEW holds the grade for a person


def scan(source: str | bytes) -> list:
    """Findings for `source` (its bytes, or its text read as UTF-8). Fails closed: whatever stops the
    scan before the end of the file is a REVIEW finding. A file Python itself cannot parse yields none
    (the worker's import fails with the error, which the student reads)."""
    try:
        return _scan(source)
    except Exception as err:  # noqa: BLE001 - RecursionError, MemoryError or a bug: never "no findings"
        return [Finding(1, None, f"could not be read to the end by the grader's scan ({type(err).__name__}); "
                                 "a person reviews this submission", REVIEW)]


def _scan(source) -> list:
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as err:
            return [Finding(1, None, f"is not UTF-8 text ({err.reason} at byte {err.start}); "
                                     "save mhsa.py as UTF-8", REVIEW)]
    coding = declared_encoding(source)
    if coding is not None and coding.lower().replace("_", "-") not in UTF8:
        return [Finding(1, None, f"declares the encoding {coding!r}; only UTF-8 is accepted: "
                                 "remove the coding line and save mhsa.py as UTF-8", REVIEW)]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # Python cannot compile it either
        return []
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    modules = _module_names(tree)
    never_run = {id(node) for guard in _main_guards(tree) for statement in guard.body for node in ast.walk(statement)}
    importable = _reaches_the_import_path(tree, modules)
    findings = []
    for top in tree.body:
        owner = top.name if isinstance(top, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) else None
        for node in ast.walk(top):
            found = None if id(node) in never_run else _finding(node, own, modules, parents)
            if found and (found[0] != WRITES_A_FILE or importable):  # a file it cannot import is data
                findings.append(Finding(getattr(node, "lineno", top.lineno), owner, *found))
    return findings


def _main_guards(tree) -> list:
    """The module-level `if __name__ == "__main__":` blocks, whose bodies never run while grading (the
    submission is imported as `mhsa`): a student's self-test there, comparing with nn.MultiheadAttention
    or writing a file, is not the submission's behaviour. None when the module could make them run:
    when it stores `__name__`, names it in a string (setattr), or writes "__main__" anywhere else."""
    guards = [node for node in tree.body if isinstance(node, ast.If) and _is_main_test(node.test)]
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and not isinstance(node.ctx, ast.Load) \
                and (node.id if isinstance(node, ast.Name) else node.attr) == "__name__":
            return []
        if isinstance(node, ast.Global) and "__name__" in node.names:
            return []
        if isinstance(node, ast.Constant) and node.value == "__name__":
            return []
    mains = sum(1 for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value == "__main__")
    return guards if mains == len(guards) else []


def _is_main_test(test) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def declared_encoding(source: str) -> str | None:
    """The encoding a coding line in the first two lines declares (PEP 263), as Python reads it."""
    try:
        return tokenize.detect_encoding(io.BytesIO(source.encode("utf-8", "replace")).readline)[0] \
            if any(CODING_LINE.match(line) for line in source.splitlines()[:2]) else None
    except SyntaxError:  # an encoding Python does not know
        return next(CODING_LINE.match(line).group(1) for line in source.splitlines()[:2] if CODING_LINE.match(line))


def library_attention(name: str) -> str | None:
    """How the findings name `name` when it is a library attention, else None. The fragments apply to
    private names only (torch's variants all are): `self.multi_head_attention = ...` is a student's."""
    if name in FORBIDDEN_NAMES:
        return FORBIDDEN_NAMES[name]
    return f"torch's {name}" if name.startswith("_") and ATTENTION_FRAGMENTS.search(name) else None


def _module_names(tree) -> dict:
    """Names bound to modules -> the module's dotted name: by imports (`import torch.nn as nn`,
    `from torch import nn`), and by assignments from them (`m = torch.nn.functional`), followed to a
    fixed point, so that a module reached through another name is read as if written plainly."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                      for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                      if a.name[:1].islower() and a.name not in ("inf", "nan", "pi", "e", "tau")}
    assignments = [(t.id, n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                   for t in n.targets if isinstance(t, ast.Name)]
    growing = True
    while growing:
        before = len(names)
        for target, value in assignments:
            root = _root_name(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
            if root in names and target not in names:
                names[target] = names[root] + ast.unparse(value).removeprefix(root)
        growing = len(names) > before
    return names


def _finding(node, own: set, modules: dict, parents: dict) -> tuple | None:
    """(message, kind) when `node` breaks the rule or needs a person, else None."""
    if isinstance(node, ast.Attribute):
        if node.attr == "__dict__" and isinstance(node.value, ast.Name) and node.value.id == "self":
            return None  # an object's own fields (a __repr__ listing them) reach nothing
        if node.attr in NAME_READS | NAME_WRITES and not _called(node, parents):
            return f"passes {node.attr} around as a value (an alias hides what it looks up)", REVIEW
        return _attribute(node.attr, modules.get(_root_name(node)))
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in own:
        if library_attention(node.id):
            return f"uses {library_attention(node.id)}, which this assignment forbids", FORBIDDEN
        if node.id in REACH_NAMES and not (_own_fields(node, parents) or _membership_test(node, parents)):
            return f"uses {node.id}, which the grader cannot follow", REVIEW
        if MODE_SWITCHES.search(node.id):
            return f"uses {node.id}, which switches torch's modes (the grader's monitor)", REVIEW
        if node.id in NAME_READS | NAME_WRITES and not _called(node, parents):
            return f"passes {node.id} around as a value (an alias hides what it looks up)", REVIEW
    if isinstance(node, ast.Call):
        return _call(node, modules, parents)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _import(node)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in REACH_DUNDERS:
        return f"defines {node.name}, which intercepts torch's calls", REVIEW
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if node.value in FORBIDDEN_NAMES and node.value not in own:
            return (f"names {FORBIDDEN_NAMES[node.value]} in a string (getattr?), which this assignment forbids",
                    FORBIDDEN)
        if node.value.isidentifier() and MODE_SWITCHES.search(node.value):
            return f"names {node.value} in a string, which switches torch's modes", REVIEW
    return None


def _attribute(name: str, module: str | None) -> tuple | None:
    """The rule for reading attribute `name` (written plainly or as a literal getattr name) of the
    module `module` (a dotted name), or of an object that is not known to be a module (None)."""
    label = library_attention(name)
    if label:
        return f"uses {label}, which this assignment forbids", FORBIDDEN
    if name in INTERNALS:
        return f"reaches into {INTERNALS[name]}, which the grader cannot follow", REVIEW
    top = module.split(".")[0] if module else None
    if name in MODULE_INTERNALS.get(top, ()):
        return f"reaches into {top}.{name}, which the grader cannot follow", REVIEW
    if MODE_SWITCHES.search(name):
        return f"uses {name}, which switches torch's modes (the grader's monitor)", REVIEW
    if name in REACH_DUNDERS or name in FRAME_ATTRIBUTES:
        return f"uses the attribute {name}, which reaches into the interpreter", REVIEW
    if module and name.startswith("_") and not _is_dunder(name):
        return f"uses a private module attribute ({name})", REVIEW
    return None


def _call(node, modules, parents) -> tuple | None:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name in NAME_READS | NAME_WRITES:
        position = 1 if name in ("getattr", "hasattr", "setattr", "delattr") else 0
        target = node.args[0] if node.args and position == 1 else None
        if name in NAME_WRITES and not (target is not None and _root_name(target) in modules):
            return None  # writing an attribute of one's own object reaches nothing
        arg = node.args[position] if len(node.args) > position else None
        if isinstance(arg, ast.Name) and (_checked_against_literals(arg.id, node, parents)
                                          or _loops_over_literals(arg.id, node, parents)):
            return None
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            return f"calls {name} with a computed name, which the grader cannot follow", REVIEW
        # attrgetter's object is not known here: a private name is then held as a module's would be
        module = modules.get(_root_name(target)) if target is not None else UNKNOWN_OBJECT
        for part in arg.value.split("."):
            found = _attribute(part, module)
            if found:
                return found
            module = None
    if name in ("timeit", "repeat", "Timer") and any(
            not isinstance(a, (ast.Lambda, ast.Name, ast.Attribute)) for a in
            [*node.args[:2], *(k.value for k in node.keywords if k.arg in ("stmt", "setup"))]):
        return f"calls {name} with code in a string (or built at run time), which the grader cannot follow", REVIEW
    if _writes_a_file(node, name, modules):
        return WRITES_A_FILE, REVIEW
    return None


def _writes_a_file(node, name, modules) -> bool:
    """Whether the call may create or change a file: open() and its kin with a mode that writes,
    os.open with flags other than O_RDONLY, Path.write_text/write_bytes, archives opened for writing,
    copies, moves and links."""
    func = node.func
    module = modules.get(_root_name(func.value)) if isinstance(func, ast.Attribute) else None
    if name in ("write_text", "write_bytes", "writestr") and isinstance(func, ast.Attribute):
        return True
    if name in FILE_CHANGERS and (module in ("shutil", "os") or isinstance(func, ast.Name)):
        return True
    if name == "open" and module == "os":
        flags = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "flags"), None)
        return not (isinstance(flags, ast.Attribute) and flags.attr == "O_RDONLY")
    if name in ("open", "ZipFile", "PyZipFile", "TarFile"):
        # open(path, mode) and io.open; Path(...).open(mode) takes the mode first
        position = 0 if name == "open" and isinstance(func, ast.Attribute) and module is None else 1
        mode = node.args[position] if len(node.args) > position else \
            next((k.value for k in node.keywords if k.arg == "mode"), None)
        return mode is not None and not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                                         and not WRITE_MODES.search(mode.value))
    return False


def _reaches_the_import_path(tree, modules) -> bool:
    """Whether the module touches where Python imports from: sys.path (also as `from sys import
    path`), a package's __path__, or the site module. Without that, a file it writes into its
    folder cannot be imported (the worker's folder is not on the path; importlib, runpy, zipimport,
    pkgutil, exec and compile are findings of their own)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and modules.get(_root_name(node.value)) == "sys":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and "site" in (
                [a.name.split(".")[0] for a in node.names] if isinstance(node, ast.Import) else [node.module]):
            return True
        if (isinstance(node, ast.Name) and node.id == "__path__") or (isinstance(node, ast.Attribute)
                                                                       and node.attr == "__path__"):
            return True
    return False


def _import(node) -> tuple | None:
    if isinstance(node, ast.ImportFrom) and node.level:
        return "uses a relative import, which the grader cannot follow", REVIEW
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
        [f"{node.module}.{a.name}" for a in node.names]
    renamed = [a.name for a in node.names if a.asname and a.name in NAME_READS | NAME_WRITES]
    if renamed:
        return f"imports {renamed[0]} under another name (an alias hides what it looks up)", REVIEW
    for name in names:
        parts = name.split(".")
        label = next(filter(None, map(library_attention, parts)), None)
        if label:
            return f"imports {label}, which this assignment forbids", FORBIDDEN
        if parts[0] in REACH_MODULES:
            return f"imports {parts[0]}, which reaches into the interpreter", REVIEW
        for i, part in enumerate(parts[1:], 1):
            found = _attribute(part, ".".join(parts[:i]))
            if found and part != "*":
                return f"imports {'.'.join(parts[:i + 1])}: {found[0]}", REVIEW
    return None


def _own_fields(node, parents) -> bool:
    """`vars(self)`: an object's own fields, as in a __repr__."""
    call = parents.get(node)
    return (node.id == "vars" and isinstance(call, ast.Call) and call.func is node and len(call.args) == 1
            and isinstance(call.args[0], ast.Name) and call.args[0].id == "self")


def _membership_test(node, parents) -> bool:
    """`'padding_mask' in globals()`, a notebook habit: the namespace, called without arguments, is only
    asked whether it holds a name, which yields a bool and reaches nothing."""
    call = parents.get(node)
    compare = parents.get(call)
    return (node.id in ("globals", "locals", "vars") and isinstance(call, ast.Call) and call.func is node
            and not call.args and not call.keywords and isinstance(compare, ast.Compare)
            and any(right is call and isinstance(op, (ast.In, ast.NotIn))
                    for op, right in zip(compare.ops, compare.comparators)))


def _called(node, parents) -> bool:
    call = parents.get(node)
    return isinstance(call, ast.Call) and call.func is node


def _checked_against_literals(name: str, node, parents) -> bool:
    """`name` is a parameter of the function around `node`, never assigned in it, and the function's
    body first raises unless it is one of some public literal names."""
    function = node
    while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        function = parents.get(function)
    if function is None:
        return False
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
    rebound = any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                  for n in ast.walk(function))
    if name not in params or rebound:
        return False
    for statement in function.body:
        test = statement.test if isinstance(statement, ast.If) else None
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name
                and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn)
                and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set))
                and all(_public_literal(e) for e in test.comparators[0].elts)
                and statement.body and isinstance(statement.body[-1], ast.Raise)):
            return True
    return False


def _loops_over_literals(name: str, node, parents) -> bool:
    """`node` is inside `for name in ("q_proj", "k_proj"):` over public literal names, and nothing in
    the loop binds `name` again."""
    loop = parents.get(node)
    while loop is not None and not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                                    and loop.target.id == name):
        loop = parents.get(loop)
    return (loop is not None and isinstance(loop.iter, (ast.Tuple, ast.List, ast.Set))
            and all(_public_literal(e) for e in loop.iter.elts)
            and not any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                        for statement in loop.body for n in ast.walk(statement)))


def _public_literal(node) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str) and not node.value.startswith("_")
            and _attribute(node.value, None) is None)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
