"""Student stubs from the reference, each function's solution replaced by a NotImplementedError.

Every `### BEGIN SOLUTION` ... `### END SOLUTION` region becomes a NotImplementedError that names
the function and points to the handout (the notebook's solution cells get the same message:
named_raises)."""
import ast
import re

BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
HANDOUT = "assignment/README.md"


def generate_stubs(source: str) -> str:
    owners = _enclosing_functions(source)
    out, inside = [], False
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        begin = BEGIN.match(line)
        if begin:
            if inside:
                raise ValueError(f"line {number}: BEGIN SOLUTION inside another solution region")
            inside, indent = True, begin["indent"]
            name = owners.get(number)
            if name is None:
                raise ValueError(f"line {number}: a solution region must sit inside a function body")
            out.append(f"{indent}# YOUR CODE HERE\n")
            out.append(_raise_line(indent, name))
        elif END.match(line):
            if not inside:
                raise ValueError(f"line {number}: END SOLUTION without BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a solution region is not closed")
    return "".join(out)


def _raise_line(indent: str, name: str) -> str:
    return (f'{indent}raise NotImplementedError("{name} is not implemented yet: '
            f'see \'{name.split(".")[0]}\' in {HANDOUT}")\n')


BARE_RAISE = re.compile(r"^(?P<indent>\s*)raise NotImplementedError\(\)\s*$")


def named_raises(source: str) -> str:
    """`source` with each bare `raise NotImplementedError()` (nbgrader's stub) given the message of
    the .py stubs, so that the notebook and mhsa.py say the same thing."""
    owners = _enclosing_functions(source)
    lines = source.splitlines(keepends=True)
    for number, line in enumerate(lines, start=1):
        bare = BARE_RAISE.match(line)
        if bare and number in owners:
            lines[number - 1] = _raise_line(bare["indent"], owners[number]).rstrip("\n") + line[len(line.rstrip("\n")):]
    return "".join(lines)


def solution_lines(source: str) -> list:
    """The distinctive lines inside solution regions: none of them may reach students."""
    lines, inside = [], False
    for line in source.splitlines():
        if BEGIN.match(line):
            inside = True
        elif END.match(line):
            inside = False
        elif inside and len(line.strip()) >= 25 and not line.strip().startswith("#"):
            lines.append(line.strip())
    return lines


def _enclosing_functions(source: str) -> dict:
    """line number -> qualified name of the innermost function or method around it."""
    owners = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in range(child.lineno, child.end_lineno + 1):
                    owners.setdefault(n, f"{prefix}{child.name}")
                # nested functions belong to their outer function: it is the one students write

    visit(ast.parse(source), "")
    return owners
