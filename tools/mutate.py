"""Mutants made mechanically: AST operators applied one place at a time to a valid solution.

The hand-written corpus (corpus/mutants*.toml) holds the mistakes the catalog was written for; these
are made without looking at the catalog, by operators that know nothing of attention: swap the
operands of @, change a dimension or a constant, turn a comparison, drop an operand of a sum or a
product, drop a keyword, swap two names, negate a condition, take two nested calls in the other
order, move a call inside a sum. Each mutant changes one node of the
source of one valid solution (corpus/valid, corpus/styles, the reference); the mutants of a style come
in a fixed order (duplicates left out), and `generate(share=n)` keeps a fixed one in n
of them (by a hash of the source), so the set is the same on every machine and changes only when a
style or an operator does.
"""
import ast
import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path

from autograder.core.paths import CORPUS, REFERENCE


@dataclass(frozen=True)
class GeneratedMutant:
    id: str          # <style>:<operator>:<line>:<n>, n counting the mutants of that operator on that line
    style: str
    operator: str
    line: int
    source: str


def styles() -> list:
    """Every valid solution mutated: the reference, corpus/valid and the styles written for this set."""
    return [REFERENCE, *sorted((CORPUS / "valid").glob("*.py")), *sorted((CORPUS / "styles").glob("*.py"))]


# ---------------------------------------------------------------- operators: node -> list of replacements

def _int(node):
    """The int a node spells (-1 is UnaryOp(USub, 1)), or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _num(value):
    return ast.UnaryOp(ast.USub(), ast.Constant(-value)) if value < 0 else ast.Constant(value)


def _called(node, *names):
    func = node.func if isinstance(node, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in names


def swap_matmul(node):
    """a @ b -> b @ a; torch.matmul(a, b) -> torch.matmul(b, a)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return [ast.BinOp(node.right, ast.MatMult(), node.left)]
    if isinstance(node, ast.Call) and _called(node, "matmul", "bmm") and len(node.args) == 2:
        return [ast.Call(node.func, node.args[::-1], node.keywords)]
    return []


def change_dim(node):
    """An int argument of a dimension-taking call, or dim=, changed to a neighbouring dimension."""
    dims = {"softmax", "log_softmax", "transpose", "chunk", "split", "tensor_split", "sum", "unsqueeze",
            "stack", "cat", "unbind", "max", "mean", "amax", "logsumexp", "size"}
    if not (isinstance(node, ast.Call) and _called(node, *dims)):
        return []
    out = []
    for i, arg in enumerate(node.args):
        value = _int(arg)
        if value is not None and value in (-2, -1, 0, 1, 2, 3) and not (_called(node, "chunk", "split") and i == 0):
            for new in {-1: (-2,), -2: (-1,), 0: (1,), 1: (2, 0), 2: (1, 3), 3: (2,)}[value]:
                args = list(node.args)
                args[i] = _num(new)
                out.append(ast.Call(node.func, args, node.keywords))
    for j, kw in enumerate(node.keywords):
        value = _int(kw.value)
        if kw.arg == "dim" and value is not None:
            for new in {-1: (-2,), -2: (-1,), 0: (1,), 1: (2,), 2: (1,), 3: (2,)}.get(value, ()):
                keywords = list(node.keywords)
                keywords[j] = ast.keyword("dim", _num(new))
                out.append(ast.Call(node.func, node.args, keywords))
    return out


def change_permutation(node):
    """permute(...) with two neighbouring entries swapped, or dropped (the identity)."""
    if not (isinstance(node, ast.Call) and _called(node, "permute") and isinstance(node.func, ast.Attribute)):
        return []
    dims = [_int(a) for a in node.args]
    if None in dims or len(dims) < 3:
        return []
    out = [node.func.value]
    for i in range(len(dims) - 1):
        swapped = dims[:i] + [dims[i + 1], dims[i]] + dims[i + 2:]
        out.append(ast.Call(node.func, [_num(d) for d in swapped], []))
    return out


def drop_call(node):
    """x.transpose(...), x.contiguous(), x.float(), x.detach() ... -> x: a method call left out."""
    dropped = {"transpose", "contiguous", "float", "double", "detach", "to", "type", "masked_fill", "t"}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in dropped:
        return [node.func.value]
    return []


def drop_operand(node):
    """a + b, a - b, a * b, a / b -> a, and -> b (a residual, a scale, a mask left out)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return [node.left] + ([node.right] if isinstance(node.op, (ast.Add, ast.Mult)) else [])
    return []


def change_operator(node):
    """+ <-> -, * <-> /, ** 0.5 <-> ** -0.5 and the like."""
    swaps = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
    if isinstance(node, ast.BinOp) and type(node.op) in swaps:
        return [ast.BinOp(node.left, swaps[type(node.op)](), node.right)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return [ast.BinOp(node.left, ast.Pow(), ast.UnaryOp(ast.USub(), node.right))]
    return []


def change_sqrt(node):
    """math.sqrt(x) -> x."""
    if isinstance(node, ast.Call) and _called(node, "sqrt") and len(node.args) == 1:
        return [node.args[0]]
    return []


def change_compare(node):
    """>= -> >, > -> >=, < -> <=, ... and == <-> !=."""
    swaps = {ast.GtE: (ast.Gt, ast.Lt), ast.Gt: (ast.GtE, ast.Lt), ast.Lt: (ast.LtE, ast.Gt),
             ast.LtE: (ast.Lt, ast.GtE), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,)}
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in swaps:
        return [ast.Compare(node.left, [new()], node.comparators) for new in swaps[type(node.ops[0])]]
    return []


def change_infinity(node):
    """-inf (float("-inf"), -math.inf, -torch.inf) -> -1e9, 0.0 and +inf."""
    text = ast.unparse(node)
    if text in ("float('-inf')", "-math.inf", "-torch.inf", "-float('inf')"):
        return [ast.UnaryOp(ast.USub(), ast.Constant(1e9)), ast.Constant(0.0),
                ast.Call(ast.Name("float"), [ast.Constant("inf")], [])]
    return []


def change_constant(node):
    """diagonal=1 -> 0 or 2, a float constant doubled: small numeric slips."""
    if isinstance(node, ast.keyword) and node.arg == "diagonal":
        value = _int(node.value)
        return [ast.keyword("diagonal", _num(value - 1)), ast.keyword("diagonal", _num(value + 1))] \
            if value is not None else []
    if isinstance(node, ast.Constant) and type(node.value) is float and node.value not in (0.0,):
        return [ast.Constant(node.value * 2)]
    return []


def swap_function(node):
    """triu <-> tril, relu <-> gelu, softmax <-> log_softmax."""
    swaps = {"triu": "tril", "tril": "triu", "relu": "gelu", "gelu": "relu", "softmax": "log_softmax"}
    if isinstance(node, ast.Attribute) and node.attr in swaps:
        return [ast.Attribute(node.value, swaps[node.attr], node.ctx)]
    return []


def swap_names(node):
    """One use of q, k, v, a mask or a norm replaced by another of them."""
    names = {"q": ("k", "v"), "k": ("q", "v"), "v": ("k", "q"), "norm1": ("norm2",), "norm2": ("norm1",),
             "attn_mask": ("key_padding_mask",), "key_padding_mask": ("attn_mask",)}
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
        return [ast.Name(new, ast.Load()) for new in names[node.id]]
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in ("norm1", "norm2"):
        return [ast.Attribute(node.value, names[node.attr][0], node.ctx)]
    return []


def swap_targets(node):
    """q, k, v = ... -> k, q, v = ... (the chunks of the projection taken in another order)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
        elts = node.targets[0].elts
        if len(elts) == 3 and all(isinstance(e, ast.Name) for e in elts):
            out = []
            for i, j in ((0, 1), (1, 2)):
                swapped = list(elts)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                out.append(ast.Assign([ast.Tuple(swapped, ast.Store())], node.value))
            return out
    return []


def negate_condition(node):
    """if c: -> if not c: (and the same in a conditional expression)."""
    if isinstance(node, (ast.If, ast.IfExp)) and not isinstance(node.test, ast.Compare):
        negated = copy.copy(node)
        negated.test = ast.UnaryOp(ast.Not(), node.test)
        return [negated]
    return []


def drop_keyword(node):
    """f(..., eps=e, dim=d, training=t, ...) with one keyword left out (its default used)."""
    if isinstance(node, ast.Call) and node.keywords:
        return [ast.Call(node.func, node.args, node.keywords[:i] + node.keywords[i + 1:])
                for i, kw in enumerate(node.keywords) if kw.arg in ("eps", "training", "diagonal", "p", "dim")]
    return []


def swap_nested_calls(node):
    """f(g(x)) -> g(f(x)), for two calls of one positional argument each: two steps taken in the other
    order (a norm applied to a sublayer's output instead of its input)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return []
    inner = node.args[0]
    if isinstance(inner, ast.Call) and len(inner.args) == 1 and not inner.keywords:
        return [ast.Call(inner.func, [ast.Call(node.func, inner.args, [])], [])]
    return []


def call_inside_sum(node):
    """f(a + b) -> a + f(b) and f(a) + b: a call moved inside a sum (a norm inside the residual)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return []
    total = node.args[0]
    if isinstance(total, ast.BinOp) and isinstance(total.op, ast.Add):
        return [ast.BinOp(total.left, ast.Add(), ast.Call(node.func, [total.right], [])),
                ast.BinOp(ast.Call(node.func, [total.left], []), ast.Add(), total.right)]
    return []


def drop_statement(node):
    """An assignment that updates a name from itself (scores = scores + mask) left out."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        target = node.targets[0].id
        if any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(node.value)):
            return [ast.Pass()]
    return []


OPERATORS = {f.__name__: f for f in (
    swap_matmul, change_dim, change_permutation, drop_call, drop_operand, change_operator, change_sqrt,
    change_compare, change_infinity, change_constant, swap_function, swap_names, swap_targets,
    negate_condition, drop_keyword, drop_statement, swap_nested_calls, call_inside_sum)}


# ---------------------------------------------------------------- applying them

def _mutable_nodes(tree):
    """The nodes of function bodies (not docstrings, decorators or signatures)."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.Lambda)):
            body = fn.body if isinstance(fn.body, list) else [fn.body]
            for statement in body:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    continue  # a docstring
                yield from ast.walk(statement)


def mutants_of(path: Path) -> list:
    """Every one-place mutant of one file, in a fixed order (duplicates and no-ops left out)."""
    text = Path(path).read_text()
    tree = ast.parse(text)
    original = ast.unparse(tree)
    style, found, seen, sites = Path(path).stem, [], {original}, {}
    nodes = list(dict.fromkeys(_mutable_nodes(tree)))  # nested functions are walked twice
    for node in nodes:
        for name, operator in OPERATORS.items():
            for replacement in operator(node):
                source = _apply(tree, node, replacement)
                if source is None or source in seen:
                    continue
                seen.add(source)
                line = getattr(node, "lineno", 0)
                site = f"{style}:{name}:{line}"
                sites[site] = sites.get(site, -1) + 1
                found.append(GeneratedMutant(f"{site}:{sites[site]}", style, name, line, source))
    return found


def _apply(tree, node, replacement):
    path = _path_to(tree, node)
    mutated = copy.deepcopy(tree)
    parent, field, index = _resolve(mutated, path)
    if index is None:
        setattr(parent, field, replacement)
    else:
        getattr(parent, field)[index] = replacement
    try:
        ast.fix_missing_locations(mutated)
        source = ast.unparse(mutated)
        compile(source, "<mutant>", "exec")
    except (SyntaxError, ValueError, TypeError):
        return None
    return source


def _path_to(tree, target):
    """The (field, index) steps from the tree to the node."""
    stack = [(tree, [])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                stack += [(v, path + [(field, i)]) for i, v in enumerate(value) if isinstance(v, ast.AST)]
            elif isinstance(value, ast.AST):
                stack.append((value, path + [(field, None)]))
    raise LookupError("node not in tree")


def _resolve(tree, path):
    node = tree
    for field, index in path[:-1]:
        node = getattr(node, field) if index is None else getattr(node, field)[index]
    field, index = path[-1]
    return node, field, index


def _kept(mutant: GeneratedMutant, share: int) -> bool:
    """A fixed pseudo-random share (1 in `share`) of the sites, the same on every machine."""
    return int(hashlib.sha256(mutant.source.encode()).hexdigest(), 16) % share == 0


def generate(paths=None, share: int = 1) -> list:
    """The mutants of every style (or of `paths`), keeping 1 in `share` of them."""
    return [m for path in (paths or styles()) for m in mutants_of(path) if _kept(m, share)]
