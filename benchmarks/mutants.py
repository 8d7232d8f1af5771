"""The whole corpus, graded and diagnosed: what CI checks on a subset (tests/test_mutants.py grades the
first manifest and one mutant of each further kind of mistake), here for every mutant.

    python benchmarks/mutants.py

Every mutant must lose points in exactly its declared parts and every valid solution none; then the
diagnosis figures of `python -m tools.diagnosis_accuracy`. docs/benchmarks/mutants.md records
the output. Exit status 1 when a declaration is wrong or the diagnosis misses its targets.
"""
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools import corpus, diagnosis_accuracy as evaluate  # noqa: E402


def grade_everything() -> list:
    """The mutants whose lost parts differ from their declaration, and valid solutions that lost points."""
    mutants = corpus.load_mutants()
    valid = [corpus.REFERENCE, *corpus.valid_variants()]
    with tempfile.TemporaryDirectory() as folder:
        paths = corpus.write_mutants(folder, mutants)
        jobs = [(path.name, path, None) for path in valid] + [(m.id, paths[m.id], m.parts) for m in mutants]
        started = time.monotonic()
        lost = corpus.grade_all(jobs)
        seconds = time.monotonic() - started
    problems = [p for m in mutants for p in corpus.wrong_parts(m, lost[m.id])]
    problems += [f"{path.name} lost points in {sorted(lost[path.name])}" for path in valid if lost[path.name]]
    print(f"graded {len(mutants)} mutants and {len(valid)} valid solutions in {seconds:.0f} s "
          f"(two at a time): {len(problems)} problems")
    for problem in problems:
        print(f"  {problem}")
    return problems


def main() -> int:
    print(f"{date.today()}, {platform.node()}, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")
    problems = grade_everything()
    print("diagnosis (python -m tools.diagnosis_accuracy):")
    diagnosis_status = evaluate.main()
    return 1 if problems or diagnosis_status else 0


if __name__ == "__main__":
    sys.exit(main())
