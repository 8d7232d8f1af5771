"""How often the diagnosis names the right mistake, and how often a wrong one, measured on the corpus.

    python -m tools.diagnosis_accuracy

Every mutant declares its misconception and the parts that lose points; the diagnosis runs on those
parts, as grading runs it on the failed ones. A mutant is
  right  when its misconception is named for its first declared part (where the bug lives),
  wrong  when any declared part is given another misconception (a student would be misled),
  silent otherwise (nothing named where the bug lives, nothing wrong anywhere).
Figures are given per manifest (corpus/mutants*.toml: the set the catalog was written on, the set
that tuned its extension, the held-out set) and per coding style. The valid solutions must get no
diagnosis at all. Corpus code is trusted, so it runs in-process.
"""
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.feedback.diagnosis import identify
from autograder.testing.backends import InProcessBackend
from tools.corpus import REFERENCE, load_mutants, valid_variants, write_mutants
from autograder.core import rubric

RIGHT, WRONG, SILENT = "right", "wrong", "silent"


def verdict(mutant, named: dict) -> str:
    """named: part -> misconception id, for the mutant's declared parts where one was named."""
    if any(named.get(part, mutant.misconception) != mutant.misconception for part in mutant.parts):
        return WRONG
    return RIGHT if named.get(mutant.parts[0]) == mutant.misconception else SILENT


@dataclass
class Report:
    named: dict = field(default_factory=dict)     # mutant id -> {part: misconception id}
    verdicts: dict = field(default_factory=dict)  # mutant id -> RIGHT | WRONG | SILENT
    groups: dict = field(default_factory=dict)    # mutant id -> (manifest, style)
    false_alarms: dict = field(default_factory=dict)  # valid file -> {part: misconception id}

    def count(self, verdict_, ids=None) -> int:
        return sum(1 for m, v in self.verdicts.items() if v == verdict_ and (ids is None or m in ids))

    def rate(self, verdict_, ids=None) -> float:
        total = len(self.verdicts) if ids is None else len(ids)
        return self.count(verdict_, ids) / total if total else 0.0

    def ids_where(self, position: int, value: str) -> set:
        return {m for m, group in self.groups.items() if group[position] == value}


def diagnose_mutants(mutants) -> dict:
    """mutant id -> {declared part: misconception id named}, running each mutant in-process."""
    with tempfile.TemporaryDirectory() as folder:
        paths = write_mutants(folder, mutants)
        return {m.id: {part: found.id for part, found in identify(InProcessBackend(paths[m.id]), list(m.parts)).items()}
                for m in mutants}


def evaluate(mutants=None) -> Report:
    mutants = load_mutants() if mutants is None else mutants
    report = Report(named=diagnose_mutants(mutants))
    for m in mutants:
        report.verdicts[m.id] = verdict(m, report.named[m.id])
        report.groups[m.id] = (m.manifest, Path(m.base).stem)
    code_parts = list(rubric.load().code_parts)
    for path in [REFERENCE, *valid_variants()]:
        found = identify(InProcessBackend(path), code_parts)
        if found:
            report.false_alarms[path.name] = {part: m.id for part, m in found.items()}
    return report


def _line(report, label, ids=None) -> str:
    total = len(report.verdicts) if ids is None else len(ids)
    return (f"{label:<28} {total:>4} mutants: right {report.count(RIGHT, ids):>3} ({report.rate(RIGHT, ids):.0%}), "
            f"wrong {report.count(WRONG, ids):>2}, silent {report.count(SILENT, ids):>3}")


def main() -> int:
    mutants = load_mutants()
    report = evaluate(mutants)
    print(_line(report, "all"))
    for position, title in ((0, "manifest"), (1, "style")):
        for value in sorted(Counter(g[position] for g in report.groups.values())):
            print(_line(report, f"  {title} {value}", report.ids_where(position, value)))
    by_id = {m.id: m for m in mutants}
    for mutant_id, v in report.verdicts.items():
        if v != RIGHT:
            m = by_id[mutant_id]
            print(f"  {v}: {mutant_id} ({m.misconception}) -> {report.named[mutant_id] or 'nothing'}")
    print(f"valid solutions diagnosed with a mistake: {len(report.false_alarms)}")
    for name, found in report.false_alarms.items():
        print(f"  false alarm: {name} -> {found}")
    return 0 if report.count(WRONG) == 0 and report.rate(RIGHT) >= 0.95 and not report.false_alarms else 1


if __name__ == "__main__":
    sys.exit(main())
