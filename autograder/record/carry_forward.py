"""Error carried forward: a bug is charged once, in the part that holds it.

A part built on others (rubric.toml's `builds_on`, followed transitively) calls their functions: a
MultiHeadSelfAttention calls the student's scaled_dot_product_attention, split_heads and masks. When
one of those parts fails a test, the later part's failed tests are run once more with the grader's
correct versions (tests_hidden/stand_ins.py) in place of the student's functions of every failed part
it builds on. A test that passes then was failed by the earlier part's bug, which that part's own
tests already charge: it keeps its points here, and its row says so. A test that still fails shows a
mistake of this part's own, and its row says that instead.

A worker receives a correct version only inside such a rerun's calls, as source text sent with the
call (calls.Call.stand_ins), in a worker of its own, and only the versions of the parts that failed
upstream, never the part under test's own; only whether each rerun test passed comes back. A student's release has no stand-ins file: there nothing is carried forward.
"""
import ast
from dataclasses import dataclass

from autograder.core import paths


@dataclass(frozen=True)
class Rerun:
    """One part's rerun: its failed tests, with correct versions of the failed parts it builds on."""
    part: str
    upstream: tuple    # the failed parts it builds on, whose functions are stood in for
    nodeids: tuple     # the tests to run again
    source: str        # the correct versions of the upstream parts' functions, as source text


def upstream_of(rubric, part: str) -> list:
    """Every part `part` builds on, directly or through another, in the rubric's order."""
    seen, todo = set(), list(rubric.parts[part].builds_on)
    while todo:
        name = todo.pop()
        if name not in seen and name in rubric.parts and name != part:
            seen.add(name)
            todo.extend(rubric.parts[name].builds_on)
    return [name for name in rubric.parts if name in seen]


def order(rubric) -> list:
    """The parts, each after every part it builds on (the rubric's order otherwise), so that a part's
    own rerun has decided whether its code is wrong before a later part's rerun asks."""
    done = []
    def visit(name, path=()):
        if name in done or name in path:
            return
        for upstream in rubric.parts[name].builds_on:
            if upstream in rubric.parts:
                visit(upstream, (*path, name))
        done.append(name)
    for name in rubric.parts:
        visit(name)
    return done


def rerun_for(rubric, part: str, tests, zeroed=()):
    """The rerun `part` calls for given `tests` so far (a Rerun), or None: when it has failed tests and
    a part it builds on fails tests too (its own code wrong, after its own rerun). Not for a part that
    is zeroed (a forbidden API), nor where the stand-ins are absent (a student's release)."""
    failed = {t.part for t in tests if not t.passed}
    upstream, functions = _stood_in(rubric, part, failed, zeroed)
    if not functions:
        return None
    nodeids = tuple(t.nodeid for t in tests if t.part == part and not t.passed)
    return Rerun(part, upstream, nodeids, stand_in_source(functions))


def rerun_coming(rubric, tests, zeroed=()) -> bool:
    """Whether some part of the rubric calls for a rerun given `tests` so far (rerun_for is not None for
    it): cheap enough to ask after every test. Once this holds during a grade's first run it holds at
    its end (failures only accumulate), and then carry_forward reruns at least the first such part in
    `order`, whose failed upstream no earlier rerun has changed, unless a part is zeroed later or the
    grade stops first. A test of a part the rubric leaves out (a narrower --rubric) counts for none."""
    failed = {t.part for t in tests if not t.passed}
    return any(_stood_in(rubric, part, failed, zeroed)[1] for part in rubric.parts if part in failed)


def _stood_in(rubric, part: str, failed, zeroed) -> tuple:
    """(the failed parts `part` builds on, the functions of theirs a rerun of it stands in for); none
    for a part that passed or is zeroed, or where the stand-ins are absent (a student's release)."""
    if part in zeroed or part not in failed or not stand_ins_available():
        return (), []
    upstream = tuple(u for u in upstream_of(rubric, part) if u in failed)
    return upstream, [f for u in upstream for f in rubric.parts[u].functions if f not in rubric.parts[part].functions]


def stand_ins_available() -> bool:
    return paths.STAND_INS.is_file()


def stand_in_source(names) -> str:
    """The source of the stand-ins called `names`, with the file's imports and private helpers: what a
    rerun's calls send the worker. Only the names asked for, so that no call carries a correct version
    of the function it tests."""
    text = paths.STAND_INS.read_text()
    tree = ast.parse(text)
    known = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    missing = sorted(set(names) - known)
    if missing:
        raise ValueError(f"{paths.STAND_INS} has no correct version of {', '.join(missing)}")
    kept = [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            or (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and (node.name in names or node.name.startswith("_")))]
    return "\n\n\n".join(ast.get_source_segment(text, node) for node in kept) + "\n"


def functions_of(rubric, parts) -> str:
    """The functions of `parts` in words: "scaled_dot_product_attention and split_heads"."""
    names = [f for p in parts for f in rubric.parts[p].functions]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def parts_in_words(parts) -> str:
    return ("part " if len(parts) == 1 else "parts ") + " and ".join(f"'{p}'" for p in parts)
