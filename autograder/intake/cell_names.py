"""Which names a notebook cell binds and which it reads, from its source alone (nothing is run).

The reruns of the tampering evidence (notebook.rerun_program) leave out a lesson-only cell (a
read-only demonstration the instructor tagged, notebook.LESSON_ONLY) when no later cell reads a name
it binds. Every answer here errs the same way: a cell that cannot be read reads everything, so a
doubt keeps the lesson cell in the rerun, where it costs time and never a wrong flag.
"""
import ast
import symtable
from dataclasses import dataclass

EVERYTHING = None  # what an unreadable cell reads


@dataclass(frozen=True)
class Names:
    """A cell's names at the notebook's top level: `bound` by any statement of the cell, `imports`
    (name -> the import that binds it, for names bound by nothing else), `reads` of names the cell
    takes from the notebook's globals (EVERYTHING when the cell cannot be read)."""
    bound: frozenset
    imports: dict
    reads: frozenset | None


def of(source: str) -> Names:
    try:
        table = symtable.symtable(source, "cell", "exec")
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Names(frozenset(), {}, EVERYTHING)
    bound, reads = set(), set()
    _walk(table, bound, reads)
    # Import bindings anywhere in the cell; a name bound in any other way anywhere, or imported two
    # ways, is not imported only (a local of the same name included: a doubt keeps the lesson cell)
    imports, other = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if imports.setdefault(name, ("import", alias.name, bool(alias.asname))) != imports[name]:
                    other.add(name)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                key = ("from", node.module, node.level, alias.name)
                if imports.setdefault(alias.asname or alias.name, key) != key:
                    other.add(alias.asname or alias.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            other.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            other.update(node.names)
    # a string that names a global may reach it through globals(), vars() or getattr on a module
    reads |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
              and n.value.isidentifier()}
    imported_only = {name: key for name, key in imports.items() if name not in other and name in bound}
    return Names(frozenset(bound), imported_only, frozenset(reads))


def _walk(table, bound: set, reads: set) -> None:
    module = table.get_type() == "module"
    for symbol in table.get_symbols():
        global_here = module or symbol.is_global() or symbol.is_declared_global()
        if global_here and symbol.is_referenced():
            reads.add(symbol.get_name())
        if global_here and (symbol.is_assigned() or symbol.is_imported() or (module and symbol.is_namespace())):
            bound.add(symbol.get_name())
    for child in table.get_children():
        _walk(child, bound, reads)


def may_leave_out(lesson: Names, before: list, after: list) -> bool:
    """Whether a lesson cell (`lesson`) can be left out of a run of the cells `before` it and `after`
    it (Names, in order) without changing what any later cell finds: no later cell reads a name the
    lesson cell binds, except a name it binds by an import that the last earlier binding of that
    name made the same way (importing again rebinds the same module)."""
    if lesson.reads is EVERYTHING or any(names.reads is EVERYTHING for names in after):
        return False
    last = {}
    for names in before:
        if names.reads is EVERYTHING:
            return False  # what it binds is unknown
        last.update(dict.fromkeys(names.bound))
        last.update(names.imports)
    changed = {name for name in lesson.bound
               if name not in lesson.imports or last.get(name) != lesson.imports[name]}
    return not any(changed & names.reads for names in after)
