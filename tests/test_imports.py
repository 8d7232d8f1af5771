"""The grader's import layering: packages stacked in layers, each importing only its own and lower ones.

LAYERS lists the packages from the bottom up (docs/architecture.md draws the same stack): a module may
import modules of its own package and of any package on a lower row, never one on its own row or
above. Every `import` and `from ... import` counts, the ones inside a function too: a function-level
import defers loading a module, not depending on it. Lazy imports stay where loading is the cost
(torch, pytest, nbgrader, dask) or where a lower layer reaches an optional one (pipeline -> gpu_checks,
which sits below it); they are not a way to import upward. No module may reach itself through a chain
of imports either, inside a package too.

An import of a submodule is an edge to that submodule alone, not to the packages above it: Python
runs a package's __init__ first, but a package importing its own submodules is not a cycle.
"""
import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("autograder", "gpu_checks", "tools")
# The packages from the bottom up. A row holds units that may not import one another; a unit is a
# package, or a tuple of names that form one (its first name labels it). A module belongs to the
# longest name here that it is or lies in.
LAYERS = (
    ("autograder.core", "autograder.isolation.guest"),  # paths, rubric, errors; the worker's own side
    ("autograder.record", ("autograder.isolation.host", "autograder.isolation")),  # a grade as data; workers
    ("autograder.intake",),                              # a submission read without running it
    ("autograder.testing",),                             # calls, backends, oracles, the pytest plugin
    ("autograder.integrity", "autograder.feedback", "gpu_checks"),  # the scan, the diagnosis, timing
    ("autograder.pipeline",),                            # one grade: the context and the stages
    (("autograder.runners", "gpu_checks.batch"),),       # grader slots, a batch, a cluster, Gradescope
    ("autograder.reporting", "autograder.authoring"),    # the class report; stubs, release, doc numbers
    (("autograder.cli", "autograder.__main__", "gpu_checks.__main__"),),  # the command lines
    (("tools", "gpu_checks.device_run", "gpu_checks.publish_device_run", "gpu_checks.study",
      "gpu_checks.validate_gpu"),),                      # evaluation and device tooling, not the product
)


@dataclass(frozen=True)
class Import:
    target: str         # the repository module it resolves to
    module_level: bool  # False: inside a function (a lazy import)
    line: int


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Every module of `packages` under `root`, by dotted name (a package by its own name)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(root: Path, packages=PACKAGES) -> dict[str, list[Import]]:
    """For each module of `packages`, the imports that resolve to a module of `packages`."""
    known = modules(root, packages)

    def resolve(name: str) -> str | None:  # the longest known module that `name` is or lies in
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imports = []

        def visit(node, module_level):
            for child in ast.iter_child_nodes(node):
                inside = module_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    targets = [resolve(alias.name) for alias in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:  # relative: `from . import x`, `from ..y import z`
                        anchor = package.split(".")[:len(package.split(".")) - (child.level - 1)]
                        base = ".".join([*anchor, *([child.module] if child.module else [])])
                    # `from pkg import sub` imports the submodule; `from mod import name` the module
                    targets = [resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in known else resolve(base)
                               for alias in child.names]
                else:
                    targets = []
                imports.extend(Import(t, inside, child.lineno) for t in dict.fromkeys(targets) if t and t != name)
                visit(child, inside)

        visit(ast.parse(path.read_text(), filename=str(path)), True)
        graph[name] = imports
    return graph


def find_cycle(graph: dict[str, list[Import]], module_level_only=False) -> list[tuple[str, Import]] | None:
    """One import cycle as [(module, its import of the next)], or None; depth-first, in a fixed order."""
    done, path, on_path = set(), [], {}

    def visit(module):
        on_path[module] = len(path)
        for imp in sorted(graph.get(module, []), key=lambda i: (i.target, i.line)):
            if module_level_only and not imp.module_level:
                continue
            path.append((module, imp))
            if imp.target in on_path:
                return path[on_path[imp.target]:]
            if imp.target not in done:
                cycle = visit(imp.target)
                if cycle:
                    return cycle
            path.pop()
        del on_path[module]
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def layer_of(module: str, layers=LAYERS) -> tuple[int, str] | None:
    """(row, unit's label) of the longest name in `layers` that `module` is or lies in; None when none."""
    found = [(len(name), row, unit if isinstance(unit, str) else unit[0])
             for row, units in enumerate(layers) for unit in units
             for name in ((unit,) if isinstance(unit, str) else unit)
             if module == name or module.startswith(name + ".")]
    return max(found)[1:] if found else None


def layer_violations(graph: dict[str, list[Import]], layers=LAYERS) -> list[str]:
    """Every import that goes up or sideways in `layers`, and every module `layers` does not place."""
    problems = [f"{module} is in no layer: add its package to LAYERS" for module in sorted(graph)
                if layer_of(module, layers) is None]
    for module, imports in sorted(graph.items()):
        source = layer_of(module, layers)
        for imp in imports:
            target = layer_of(imp.target, layers)
            if source is None or target is None or target[1] == source[1] or target[0] < source[0]:
                continue
            problems.append(f"{module} ({source[1]}, row {source[0]}) imports {imp.target} ({target[1]}, "
                            f"row {target[0]}) on line {imp.line}"
                            f"{'' if imp.module_level else ', inside a function'}")
    return problems


def describe(cycle) -> str:
    return "\n".join(f"  {module} -> {imp.target} (line {imp.line}, "
                     f"{'module level' if imp.module_level else 'inside a function'})" for module, imp in cycle)


def test_the_grader_has_no_import_cycle():
    cycle = find_cycle(import_graph(REPO))
    assert cycle is None, ("an import cycle; move what both sides need into a lower module "
                           "(docs/architecture.md, The layout in one picture):\n" + describe(cycle))


def test_every_package_imports_only_its_own_and_lower_layers():
    problems = layer_violations(import_graph(REPO))
    assert not problems, ("an import against the layers; move what both sides need into the lower package "
                          "(docs/architecture.md, The layout in one picture):\n" + "\n".join(problems))


def test_the_layer_check_fails_an_upward_a_sideways_and_an_unplaced_module(tmp_path):
    root = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "", "pkg/low/base.py": "def helper():\n    from pkg.high import run\n",
        "pkg/mid/__init__.py": "", "pkg/mid/a.py": "from pkg.side import b\nfrom pkg.low import base\n",
        "pkg/side/__init__.py": "", "pkg/side/b.py": "",
        "pkg/high/__init__.py": "", "pkg/high/run.py": "from pkg.mid import a\n",
        "pkg/stray.py": "",
    })
    layers = (("pkg.low",), ("pkg.mid", "pkg.side"), ("pkg.high",))
    problems = layer_violations(import_graph(root, ("pkg",)), layers)
    assert "pkg.low.base (pkg.low, row 0) imports pkg.high.run (pkg.high, row 2) on line 2, inside a function" in problems
    assert "pkg.mid.a (pkg.mid, row 1) imports pkg.side.b (pkg.side, row 1) on line 1" in problems
    assert "pkg.stray is in no layer: add its package to LAYERS" in problems
    assert not any("pkg.high.run" in p and "imports pkg.mid.a" in p for p in problems)  # downward is fine
    assert not any(p.startswith("pkg.mid.a") and "pkg.low.base" in p for p in problems)
    together = (("pkg.low",), (("pkg.mid", "pkg.side"),), (("pkg.high", "pkg.stray", "pkg"),))
    assert layer_violations(import_graph(root, ("pkg",)), together) == [  # one unit may import itself
        "pkg.low.base (pkg.low, row 0) imports pkg.high.run (pkg.high, row 2) on line 2, inside a function"]


def test_the_walk_sees_the_repository_s_imports():
    """The check above could pass by seeing nothing: it finds known imports of both kinds, across
    both packages."""
    graph = import_graph(REPO)
    edges = {(m, i.target, i.module_level) for m, imports in graph.items() for i in imports}
    assert ("autograder.runners.slot", "autograder.pipeline.grade_file", True) in edges
    assert ("autograder.intake.route", "autograder.core.handin", True) in edges
    assert ("autograder.intake.submission", "autograder.intake.notebook", False) in edges  # lazy: nbgrader's reader costs
    assert ("autograder.pipeline.grading", "gpu_checks", False) in edges  # the one way into gpu_checks
    assert ("gpu_checks", "gpu_checks.grading", True) in edges
    assert len(graph) > 50 and sum(map(len, graph.values())) > 150


def write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_a_cycle_of_module_level_imports_is_found(tmp_path):
    root = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/cli.py": "from pkg import runner\n",
        "pkg/runner.py": "import os\nfrom pkg.slot import Slot\n",
        "pkg/slot.py": "from . import cli  # the slot runs the command line\nclass Slot: ...\n",
    })
    cycle = find_cycle(import_graph(root, ("pkg",)))
    assert cycle is not None
    assert {m for m, _ in cycle} == {"pkg.cli", "pkg.runner", "pkg.slot"}
    assert all(imp.module_level for _, imp in cycle)
    assert "pkg.slot -> pkg.cli (line 1, module level)" in describe(cycle)


def test_a_cycle_closed_by_an_import_inside_a_function_is_found(tmp_path):
    """A lazy import does not break a cycle for this check: only a module that moves does."""
    root = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/load.py": "def load():\n    from pkg.sub import route\n    return route.pick()\n",
        "pkg/sub/route.py": "from ..load import GradingError\n",
    })
    graph = import_graph(root, ("pkg",))
    assert find_cycle(graph, module_level_only=True) is None
    cycle = find_cycle(graph)
    assert {m for m, _ in cycle} == {"pkg.load", "pkg.sub.route"}
    assert "pkg.load -> pkg.sub.route (line 2, inside a function)" in describe(cycle)


def test_layers_that_only_import_downward_pass(tmp_path):
    """The same modules once the shared piece sits in a lower module: no cycle, and a package's
    __init__ importing its own submodules is none either."""
    root = write_package(tmp_path, {
        "pkg/__init__.py": "from pkg.sub import route\n",
        "pkg/errors.py": "class GradingError(Exception): ...\n",
        "pkg/load.py": "def load():\n    from pkg.sub import route\n    return route.pick()\n",
        "pkg/sub/__init__.py": "from .route import pick\n",
        "pkg/sub/route.py": "import pkg.errors\nfrom pkg.errors import GradingError\n",
    })
    graph = import_graph(root, ("pkg",))
    assert find_cycle(graph) is None
    assert Import("pkg.errors", True, 1) in graph["pkg.sub.route"]
    assert Import("pkg.sub.route", False, 2) in graph["pkg.load"]


def test_every_runner_reaches_grading_through_the_slot_module():
    """Gradescope's runner, the gradebook, the timing batch and the cluster share the slot module
    (grade options, time limit, failure results); none borrows them from the batch."""
    graph = import_graph(REPO)
    for runner in ("autograder.runners.gradescope", "autograder.runners.gradebook", "gpu_checks.batch", "autograder.runners.cluster",
                   "autograder.runners.batch"):
        targets = {i.target for i in graph[runner]}
        assert "autograder.runners.slot" in targets, f"{runner} does not grade through autograder.runners.slot"
        assert "autograder.runners.batch" not in targets, f"{runner} imports the batch: move what it needs to autograder.runners.slot"


def test_the_product_never_imports_the_evaluation_tooling():
    """tools/ (the corpus's loaders, the mutant generator, the diagnosis's accuracy measures) is the
    project's, not the product's: no module of autograder/ or gpu_checks/ imports it, lazily or not, so
    a student's release and the Gradescope bundle, which do not ship it (autograder/core/paths.py), never
    need it."""
    graph = import_graph(REPO)
    product = {m: imports for m, imports in graph.items() if not m.startswith("tools")}
    reaching = sorted(f"{m} -> {i.target} (line {i.line})" for m, imports in product.items() for i in imports
                      if i.target.startswith("tools"))
    assert not reaching, "the product imports the tooling:\n" + "\n".join(reaching)
    assert any(i.target == "tools.corpus" for i in graph["tools.diagnosis_accuracy"])  # the walk sees tools/
