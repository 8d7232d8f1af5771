"""Forbidden APIs and evasions found by reading the source (never running it), mapped to rubric parts.

This scan decides: the worker's record of forbidden operators at run time
(executor.ForbiddenApiMonitor) runs in the same process as student code, so it can only add findings.
The scan therefore reads the source exactly as Python will run it and refuses whatever it cannot
follow:
  - the text must be UTF-8, and a coding line naming another encoding is refused (`# coding: utf-7`
    would let Python run lines the scan reads as comments; the worker compiles the UTF-8 text, so a
    coding line has no effect there either);
  - only the modules in ALLOWED_IMPORTS may be imported (what the handout's functions need), and of
    torch no private or internal module (torch._C, torch.ops, torch.overrides ...);
  - no dynamic reach into modules or the interpreter: dunder and frame attributes, `__builtins__`,
    `vars`/`globals`/`locals`, getattr-like calls with a private name or a computed one, and a
    module used as a plain value (`m = torch`), which would hide which module a later getattr
    reads. One computed name is followed: a parameter the function checks against a list of
    literal names before anything else can change it (`if activation not in ("relu", "gelu"):
    raise ...` then `getattr(F, activation)`), a style valid solutions use.
"""
import ast
import io
import re
import tokenize
from dataclasses import dataclass

FORBIDDEN_NAMES = {
    "MultiheadAttention": "nn.MultiheadAttention",
    "multi_head_attention_forward": "F.multi_head_attention_forward",
    "scaled_dot_product_attention": "F.scaled_dot_product_attention",
    "Transformer": "nn.Transformer", "TransformerEncoder": "nn.TransformerEncoder",
    "TransformerEncoderLayer": "nn.TransformerEncoderLayer", "TransformerDecoder": "nn.TransformerDecoder",
    "TransformerDecoderLayer": "nn.TransformerDecoderLayer",
    "_native_multi_head_attention": "torch._native_multi_head_attention",
}
# Every module a submission may import (its submodules too, except private or internal ones).
ALLOWED_IMPORTS = {"torch", "math", "typing", "typing_extensions", "functools", "itertools", "collections",
                   "dataclasses", "numbers", "warnings", "__future__", "enum", "abc", "operator", "copy",
                   "numpy", "einops"}
# Attribute chains that only serve to reach torch internals or the grader.
EVASIONS = {"ops": "torch.ops", "_C": "torch._C", "overrides": "torch.overrides",
            "_python_dispatch": "torch.utils._python_dispatch"}
EVASION_NAMES = {"__import__", "importlib", "ctypes", "exec", "eval", "compile", "subprocess", "gc",
                 "inspect", "builtins", "__builtins__", "__loader__", "__spec__", "vars", "globals",
                 "locals", "breakpoint", "sys"}
# Dunder attributes a solution uses; every other one (__dict__, __globals__, __subclasses__ ...) is refused.
ALLOWED_DUNDERS = {"__init__", "__name__"}
FRAME_ATTRIBUTES = {"tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame",
                    "cr_frame", "ag_frame", "gi_code", "co_code", "func_globals"}
NAME_LOOKUPS = {"getattr", "setattr", "delattr", "hasattr"}
UTF8 = {"utf-8", "utf8", "utf_8", "utf-8-sig"}
CODING_LINE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class Finding:
    line: int
    function: str | None  # the top-level function or class it sits in; None at module level
    message: str


def scan(source: str | bytes) -> list:
    """Findings for `source` (its bytes, or its text read as UTF-8); an unparsable file yields none
    (the import reports the error)."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as err:
            return [Finding(1, None, f"is not UTF-8 text ({err.reason} at byte {err.start}); "
                                     "save mhsa.py as UTF-8")]
    coding = declared_encoding(source)
    if coding is not None and coding.lower().replace("_", "-") not in UTF8:
        return [Finding(1, None, f"declares the encoding {coding!r}; only UTF-8 is accepted: "
                                 "remove the coding line and save mhsa.py as UTF-8")]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    modules = _module_aliases(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    findings = []
    for top in tree.body:
        owner = top.name if isinstance(top, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) else None
        for node in ast.walk(top):
            message = _forbidden(node, own, modules, parents)
            if message:
                findings.append(Finding(getattr(node, "lineno", top.lineno), owner, message))
    return findings


def declared_encoding(source: str) -> str | None:
    """The encoding a coding line in the first two lines declares (PEP 263), as Python reads it."""
    try:
        return tokenize.detect_encoding(io.BytesIO(source.encode("utf-8", "replace")).readline)[0] \
            if any(CODING_LINE.match(line) for line in source.splitlines()[:2]) else None
    except SyntaxError:  # an encoding Python does not know
        return next(CODING_LINE.match(line).group(1) for line in source.splitlines()[:2] if CODING_LINE.match(line))


def _module_aliases(tree) -> set:
    """Names bound to modules by imports (`import torch.nn as nn`, `from torch import nn`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names
                      if a.name[:1].islower() and a.name not in ("inf", "nan", "pi", "e", "tau")}
    return names


def _forbidden(node, own: set, modules: set, parents: dict) -> str | None:
    """Why `node` is not allowed, or None; `own` holds the submission's own top-level names."""
    if isinstance(node, ast.Attribute):
        if node.attr in FORBIDDEN_NAMES:
            return f"uses {FORBIDDEN_NAMES[node.attr]}, which this assignment forbids"
        if node.attr in EVASIONS and _root_name(node) in modules:
            return f"reaches into {EVASIONS[node.attr]}, which this assignment does not allow"
        if node.attr == "modules" and _root_name(node) == "sys":
            return "reaches into sys.modules, which this assignment does not allow"
        if _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDERS:
            return f"uses the attribute {node.attr}, which this assignment does not allow"
        if node.attr in FRAME_ATTRIBUTES:
            return f"reaches into interpreter frames ({node.attr}), which this assignment does not allow"
        if node.attr.startswith("_") and _root_name(node) in modules:
            return f"uses a private module attribute ({node.attr}), which this assignment does not allow"
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        if node.id in FORBIDDEN_NAMES and node.id not in own:
            return f"uses {FORBIDDEN_NAMES[node.id]}, which this assignment forbids"
        if node.id in EVASION_NAMES and node.id not in own:
            return f"uses {node.id}, which this assignment does not allow"
        if node.id in modules and not isinstance(parents.get(node), ast.Attribute) and not _lookup_target(node, parents):
            return f"uses the module {node.id} as a value, which this assignment does not allow"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in NAME_LOOKUPS:
        name = node.args[1] if len(node.args) > 1 else None
        if isinstance(name, ast.Name) and _checked_against_literals(name.id, node, parents):
            return None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return f"calls {node.func.id} with a computed name, which this assignment does not allow"
        if name.value.startswith("_") and name.value not in ALLOWED_DUNDERS:
            return f"calls {node.func.id} with the private name {name.value!r}, which this assignment does not allow"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _import_finding(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in FORBIDDEN_NAMES:
        return f"names {FORBIDDEN_NAMES[node.value]} in a string (getattr?), which this assignment forbids"
    return None


def _lookup_target(node, parents) -> bool:
    """`node` is the object of getattr(node, ...)."""
    call = parents.get(node)
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in NAME_LOOKUPS
            and bool(call.args) and call.args[0] is node)


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
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) and not e.value.startswith("_")
                        and e.value not in FORBIDDEN_NAMES for e in test.comparators[0].elts)
                and statement.body and isinstance(statement.body[-1], ast.Raise)):
            return True
    return False


def _import_finding(node) -> str | None:
    if isinstance(node, ast.ImportFrom) and node.level:
        return "uses a relative import, which this assignment does not allow"
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
        [f"{node.module}.{a.name}" for a in node.names]
    for name in names:
        parts = name.split(".")
        if parts[-1] in FORBIDDEN_NAMES:
            return f"imports {FORBIDDEN_NAMES[parts[-1]]}, which this assignment forbids"
        if parts[0] not in ALLOWED_IMPORTS:
            return (f"imports {parts[0]}, which this assignment does not allow "
                    f"(allowed: {', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})")
        if any(p in EVASIONS or (p.startswith("_") and p != "*") for p in parts[1:]):
            return f"imports {name}, which this assignment does not allow"
    return None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _root_name(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
