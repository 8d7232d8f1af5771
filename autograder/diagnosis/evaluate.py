"""How often the diagnosis names the right mistake, measured on the corpus.

    python -m autograder.diagnosis.evaluate

For every mutant whose misconception the catalog knows ("covered"), the diagnosis runs on the parts
the mutant declares; it is right when it names the mutant's misconception for its first declared
part (where the bug lives). Mutants of the valid variants (other coding styles, written after the
catalog) are counted apart too: they show how it does on code it was not shaped around. The valid
solutions must get no diagnosis at all. Corpus code is trusted, so it runs in-process.
"""
import sys
import tempfile
from dataclasses import dataclass, field

from autograder.backends import InProcessBackend
from autograder.diagnosis import identify
from autograder.diagnosis.catalog import IDS
from autograder.diagnosis.corpus import REFERENCE, Mutant, load_mutants, valid_variants, write_mutants
from autograder.rubric import PARTS


@dataclass
class Report:
    right: list = field(default_factory=list)       # mutant ids named correctly
    other_styles: list = field(default_factory=list)  # covered mutants not based on the reference
    wrong: dict = field(default_factory=dict)       # mutant id -> what was named instead (or "nothing")
    uncovered: list = field(default_factory=list)   # mutants whose misconception the catalog lacks
    downstream: tuple = (0, 0)                      # (right, total) over the other declared parts
    downstream_wrong: list = field(default_factory=list)  # "mutant/part -> named"
    false_alarms: dict = field(default_factory=dict)  # valid file -> {part: misconception}

    @property
    def accuracy(self) -> float:
        covered = len(self.right) + len(self.wrong)
        return len(self.right) / covered if covered else 0.0


def evaluate() -> Report:
    report = Report()
    mutants = load_mutants()
    right_after, total_after = 0, 0
    with tempfile.TemporaryDirectory() as folder:
        paths = write_mutants(folder, mutants)
        for mutant in mutants:
            if mutant.misconception not in IDS:
                report.uncovered.append(mutant.id)
                continue
            if mutant.base != Mutant.base:
                report.other_styles.append(mutant.id)
            found = identify(InProcessBackend(paths[mutant.id]), list(mutant.parts))
            named = {part: m.id for part, m in found.items()}
            if named.get(mutant.parts[0]) == mutant.misconception:
                report.right.append(mutant.id)
            else:
                report.wrong[mutant.id] = named.get(mutant.parts[0], "nothing")
            for part in mutant.parts[1:]:
                total_after += 1
                if named.get(part) == mutant.misconception:
                    right_after += 1
                else:
                    report.downstream_wrong.append(f"{mutant.id}/{part} -> {named.get(part, 'nothing')}")
    report.downstream = (right_after, total_after)
    code_parts = [p for p in PARTS if p not in ("timing", "knowledge")]
    for path in [REFERENCE, *valid_variants()]:
        found = identify(InProcessBackend(path), code_parts)
        if found:
            report.false_alarms[path.name] = {part: m.id for part, m in found.items()}
    return report


def main() -> int:
    report = evaluate()
    covered = len(report.right) + len(report.wrong)
    print(f"mutants covered by the catalog: {covered} of {covered + len(report.uncovered)}")
    print(f"right misconception named (first declared part): {len(report.right)} of {covered} "
          f"= {report.accuracy:.0%}")
    styled = [m for m in report.other_styles if m in report.right]
    print(f"  of which mutants of the valid variants (other styles): {len(styled)} of {len(report.other_styles)}")
    print(f"right misconception named in the other declared parts: {report.downstream[0]} of {report.downstream[1]}")
    for mutant, named in sorted(report.wrong.items()):
        print(f"  wrong: {mutant} -> {named}")
    for line in report.downstream_wrong:
        print(f"  other part: {line}")
    for mutant in report.uncovered:
        print(f"  not covered: {mutant}")
    print(f"valid solutions diagnosed with a mistake: {len(report.false_alarms)}")
    for name, found in report.false_alarms.items():
        print(f"  false alarm: {name} -> {found}")
    return 0 if report.accuracy >= 0.8 and not report.false_alarms else 1


if __name__ == "__main__":
    sys.exit(main())
