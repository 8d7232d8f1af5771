"""Forbidden APIs found by reading the source (never running it), mapped to rubric parts.

The worker also records forbidden operators at run time (executor.ForbiddenApiMonitor); this scan
catches what never runs in a test and names the line, and flags the dynamic tricks
(torch.ops, torch._C, __import__, sys.modules ...) a submission would need to dodge the runtime check.
"""
import ast
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
# Attribute chains and names that only serve to reach torch internals or the grader.
EVASIONS = {"ops": "torch.ops", "_C": "torch._C", "overrides": "torch.overrides",
            "_python_dispatch": "torch.utils._python_dispatch"}
EVASION_NAMES = {"__import__", "importlib", "sys.modules", "ctypes", "exec", "eval", "compile",
                 "subprocess", "gc", "inspect", "builtins"}


@dataclass(frozen=True)
class Finding:
    line: int
    function: str | None  # the top-level function or class it sits in; None at module level
    message: str


def scan(source: str) -> list:
    """Findings for `source`; an unparsable file yields none (the import reports the error)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    findings = []
    for top in tree.body:
        owner = top.name if isinstance(top, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) else None
        for node in ast.walk(top):
            message = _forbidden(node, own)
            if message:
                findings.append(Finding(getattr(node, "lineno", top.lineno), owner, message))
    return findings


def _forbidden(node, own: set) -> str | None:
    """Why `node` is not allowed, or None; `own` holds the submission's own top-level names."""
    if isinstance(node, ast.Attribute):
        if node.attr in FORBIDDEN_NAMES:
            return f"uses {FORBIDDEN_NAMES[node.attr]}, which this assignment forbids"
        if node.attr in EVASIONS and _root_name(node) == "torch":
            return f"reaches into {EVASIONS[node.attr]}, which this assignment does not allow"
        if node.attr == "modules" and _root_name(node) == "sys":
            return "reaches into sys.modules, which this assignment does not allow"
    if isinstance(node, ast.Name):
        if node.id in FORBIDDEN_NAMES and node.id not in own and isinstance(node.ctx, ast.Load):
            return f"uses {FORBIDDEN_NAMES[node.id]}, which this assignment forbids"
        if node.id in EVASION_NAMES and isinstance(node.ctx, ast.Load):
            return f"uses {node.id}, which this assignment does not allow"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        for name in names:
            leaf = name.split(".")[-1]
            if leaf in FORBIDDEN_NAMES:
                return f"imports {FORBIDDEN_NAMES[leaf]}, which this assignment forbids"
            if name.split(".")[0] in EVASION_NAMES or any(p in EVASIONS for p in name.split(".")[1:]):
                return f"imports {name}, which this assignment does not allow"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in FORBIDDEN_NAMES:
        return f"names {FORBIDDEN_NAMES[node.value]} in a string (getattr?), which this assignment forbids"
    return None


def _root_name(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
