"""Where the test run's time goes: per file and per test, from the report `make test` writes.

    python benchmarks/test_durations.py [build/test-report.xml] [--top 25]

`make test` runs `pytest tests` with `--junitxml=build/test-report.xml` (pytest's JUnit report, whose
time per test is its setup, call and teardown together: a module-scoped fixture's cost lands on the
first test that uses it). This prints, as Markdown, the run's total, each file's share and its number
of tests and of tests marked slow (the ones `make test-fast` leaves out), and the slowest tests.
docs/benchmarks/test-durations.md records the output of full runs.
"""
import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def test_times(report: Path) -> list:
    """(file, test name, seconds, outcome) for each test of a JUnit report."""
    rows = []
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is "tests.test_x" or "tests.test_x.TestClass": the file is the first two parts
        file = "/".join(module[:2]) + ".py"
        outcome = ("skipped" if case.find("skipped") is not None
                   else "failed" if case.find("failure") is not None or case.find("error") is not None
                   else "passed")
        rows.append((file, case.get("name", ""), float(case.get("time", 0)), outcome))
    return rows


def slow_marked(file: str, name: str) -> bool:
    """Whether make test-fast leaves the test out (tests/conftest.py's lists)."""
    from tests import conftest

    function = name.split("[")[0]
    return Path(file).name in conftest.SLOW_FILES or f"{Path(file).name}::{function}" in conftest.SLOW_TESTS


def summary(rows, top: int) -> str:
    total = sum(seconds for _, _, seconds, _ in rows)
    by_file = defaultdict(lambda: [0.0, 0, 0])
    for file, name, seconds, _ in rows:
        by_file[file][0] += seconds
        by_file[file][1] += 1
        by_file[file][2] += slow_marked(file, name)
    outcomes = defaultdict(int)
    for *_, outcome in rows:
        outcomes[outcome] += 1
    fast = sum(seconds for file, name, seconds, _ in rows if not slow_marked(file, name))
    lines = [f"{len(rows)} tests ({', '.join(f'{n} {o}' for o, n in sorted(outcomes.items()))}) in "
             f"{total:.0f} s ({total / 60:.1f} min); the tests `make test-fast` keeps: {fast:.0f} s.", "",
             "| file | seconds | share | tests | marked slow |", "| --- | ---: | ---: | ---: | ---: |"]
    for file, (seconds, count, slow) in sorted(by_file.items(), key=lambda item: -item[1][0]):
        lines.append(f"| {file} | {seconds:.0f} | {seconds / total:.0%} | {count} | {slow} |")
    lines += ["", f"The {top} slowest tests:", "", "| test | seconds |", "| --- | ---: |"]
    for file, name, seconds, _ in sorted(rows, key=lambda row: -row[2])[:top]:
        lines.append(f"| {file}::{name} | {seconds:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", type=Path, default=REPO / "build" / "test-report.xml")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"{args.report}: no report; `make test` writes it", file=sys.stderr)
        return 2
    print(summary(test_times(args.report), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
