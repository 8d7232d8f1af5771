"""Error carried forward, measured: points a one-place bug costs outside the part that holds it.

    python benchmarks/carry_forward.py [--share N]

Each mutant is graded twice by the real grading engine (in-process, public and hidden suites), with
the rubric's `[results] carry_forward` off and on, and the points it loses are split between the part
that holds the bug and every other part. The mutants: the corpus's (corpus/mutants*.toml) whose
failures reach past their own part, and the generator's (tools/mutate.py, 1 in
`--share` of them) in the functions of parts that others build on, over every style it mutates
(the reference, corpus/valid, corpus/styles). The part that holds a bug: a corpus mutant's first
declared part; a generated mutant's, the rubric part of the function holding the mutated line.
docs/benchmarks/carry-forward.md records the output. Exit status 1 when carrying forward loses a
point anywhere, or leaves a bug charged outside its part on more mutants than it frees.
"""
import argparse
import ast
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import date
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.core import rubric as rubric_file  # noqa: E402
from tools import corpus, mutate  # noqa: E402


def upstream_parts(rubric) -> set:
    """The parts some other part builds on: where a bug can be charged twice."""
    return {u for p in rubric.parts.values() for u in p.builds_on}


def part_of_line(source: str, line: int, rubric):
    """The rubric part of the contract function or class whose body holds `line`, or None."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.lineno <= line <= node.end_lineno:
            parts = rubric.part_of(node.name)
            return parts[0] if parts else None
    return None


def jobs(share: int, rubric) -> list:
    """(id, style, part holding the bug, source) of every mutant measured."""
    upstream = upstream_parts(rubric)
    found = [(m.id, Path(m.base).stem, m.parts[0], m.source()) for m in corpus.load_mutants()
             if len(m.parts) > 1 and m.parts[0] in upstream]
    for path in mutate.styles():
        original = path.read_text()  # a generated mutant's line number is its original file's
        for m in mutate.generate([path], share=share):
            part = part_of_line(original, m.line, rubric)
            if part in upstream:
                found.append((m.id, m.style, part, m.source))
    return found


def grade_both(job) -> tuple:
    """(id, style, bug part, {part: lost points} without carrying forward, the same with it)."""
    key, style, part, source = job
    from autograder.pipeline.grading import grade

    rubric = rubric_file.load()
    lost = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mhsa.py"
        path.write_text(source)
        for carry in (False, True):
            shown = replace(rubric, results=replace(rubric.results, carry_forward=carry))
            result = grade(path, isolation="inprocess", extras=False, rubric=shown)
            lost.append({name: round(p.max_score - p.score, 4) for name, p in result.parts.items()})
    return key, style, part, lost[0], lost[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=int, default=12, help="keep 1 in N of the generated mutants (default 12)")
    args = parser.parse_args()
    rubric = rubric_file.load()
    todo = jobs(args.share, rubric)
    print(f"{date.today()}, {platform.node()}, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}; {len(todo)} mutants, each graded with carry_forward off and on")
    started = time.monotonic()
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        graded = list(pool.map(grade_both, todo))
    print(f"graded in {time.monotonic() - started:.0f} s, two at a time\n")
    rows, totals, raised = [], {"own": [0.0, 0.0], "outside": [0.0, 0.0], "spilled": [0, 0]}, []
    for key, style, part, before, after in graded:
        if not any(before.values()):
            continue  # an equivalent mutant: no test tells it from the original
        own = (before.get(part, 0.0), after.get(part, 0.0))
        outside = tuple(sum(v for name, v in lost.items() if name != part) for lost in (before, after))
        for i in (0, 1):
            totals["own"][i] += own[i]
            totals["outside"][i] += outside[i]
            totals["spilled"][i] += outside[i] > 0
        raised += [f"{key}: {name} lost {after[name]} with carry_forward, {before.get(name, 0.0)} without"
                   for name in after if after[name] > before.get(name, 0.0) + 1e-9]
        rows.append(f"| {key} | {style} | {part} | {own[0]:g} | {outside[0]:g} | {outside[1]:g} | "
                    + ", ".join(f"{n} {v:g}" for n, v in after.items() if v and n != part) + " |")
    print("| mutant | style | bug in | own part lost | lost outside, off | lost outside, on | still charged outside (on) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    styles = sorted({style for _, style, _, _, _ in graded})
    print(f"\n{len(rows)} mutants that lose points, over {len(styles)} styles ({', '.join(styles)}):")
    print(f"  points lost in the part that holds the bug: {totals['own'][0]:.2f} off, {totals['own'][1]:.2f} on")
    print(f"  points lost outside it: {totals['outside'][0]:.2f} off, {totals['outside'][1]:.2f} on")
    print(f"  mutants charged outside their part: {totals['spilled'][0]} off, {totals['spilled'][1]} on")
    for line in raised:
        print(f"  LOWER WITH CARRY FORWARD: {line}")
    return 1 if raised or totals["spilled"][1] > totals["spilled"][0] else 0


if __name__ == "__main__":
    sys.exit(main())
