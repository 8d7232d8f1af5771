"""A Grade as Gradescope's results.json, as a table for the terminal, and written atomically."""
import json
import os
import tempfile
from pathlib import Path

from autograder.grading import SEED_NOTE, Grade


def test_output(test, rubric, diagnosis: str = "") -> str:
    """What the student reads for one test: everything for public tests, the rubric's policy for hidden."""
    if test.passed:
        return ""
    policy = "full" if test.suite == "public" else rubric.parts[test.part].feedback
    if policy == "name":
        return f"Failed: {test.nodeid.split('::')[-1]} (part '{test.part}')."
    lines = [test.summary or "failed"]
    if policy == "full" and test.detail:
        lines.append(test.detail)
    if test.hint:
        lines.append(f"Hint: {test.hint}")
    if test.example:
        lines.append(f"Smallest failing case: {test.example.removeprefix('Falsifying example: ')}")
    if test.forbidden:
        lines.append(f"This part scores 0: {test.forbidden}")
    if diagnosis:
        lines.append(f"Likely mistake: {diagnosis}")
    return "\n".join(lines)


def test_name(test) -> str:
    path, _, name = test.nodeid.partition("::")
    return f"{test.part} ({test.suite}): {Path(path).stem.removeprefix('test_')}::{name}"


def to_gradescope(grade: Grade, rubric) -> dict:
    tests = []
    for t in grade.tests:
        tests.append({
            "name": test_name(t), "score": round(t.score, 4), "max_score": round(t.max_score, 4),
            "status": "passed" if t.passed else "failed", "output": test_output(t, rubric, _diagnosis(grade, t)),
            "visibility": "visible", "tags": [t.part, t.suite],
        })
    for entry in grade.extra_entries:
        row = {"name": entry["name"], "score": round(float(entry["score"]), 4),
               "max_score": round(float(entry["max_score"]), 4), "output": entry.get("output", ""),
               "visibility": "visible", "tags": [entry["part"]]}
        if entry["status"] in ("passed", "failed"):
            row["status"] = entry["status"]
        else:  # Gradescope knows no "skipped": no status, and nothing that counts as lost
            row.update(max_score=0.0, output=f"Not graded: {row['output']}")
        tests.append(row)
    return {
        "score": grade.score,
        "execution_time": grade.execution_time,
        "output": summary_text(grade),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"submission": grade.submission, "max_score": grade.max_score,
                       "isolation": grade.isolation, "suites": list(grade.suites), "seeds": SEED_NOTE,
                       "parts": {name: {"score": p.score, "max_score": p.max_score, "graded": p.graded,
                                        "notes": p.notes, "diagnosis": p.diagnosis}
                                 for name, p in grade.parts.items()},
                       "printed_output": grade.output[-4000:]},
    }


def summary_text(grade: Grade) -> str:
    lines = [f"Score: {grade.score:g} / {grade.max_score:g}  (isolation: {grade.isolation})"]
    for p in grade.parts.values():
        state = f"{p.score:g} / {p.max_score:g}" if p.graded else "not graded"
        lines.append(f"  {p.name:<10} {state:>14}  {p.title}")
        lines += [f"      {note}" for note in p.notes if note]
        if p.diagnosis:
            lines.append(f"      Likely mistake: {p.diagnosis}")
    return "\n".join(lines)


def table(grade: Grade, rubric, failures: bool = True) -> str:
    """The terminal view: parts, then each failed test with its student-facing message."""
    lines = [f"{grade.submission}: {grade.score:g} / {grade.max_score:g} points "
             f"(suites: {', '.join(grade.suites)}; isolation: {grade.isolation}; {grade.execution_time:.1f} s)",
             "", f"  {'part':<10} {'score':>14}  {'tests passed':>12}"]
    for p in grade.parts.values():
        mine = [t for t in grade.tests if t.part == p.name]
        passed = f"{sum(t.passed for t in mine)}/{len(mine)}" if mine else "-"
        state = f"{p.score:g} / {p.max_score:g}" if p.graded else "not graded"
        lines.append(f"  {p.name:<10} {state:>14}  {passed:>12}")
        lines += [f"      {note}" for note in p.notes if note]
        if p.diagnosis:
            lines.append(f"      Likely mistake: {p.diagnosis}")
    if failures:
        for t in (t for t in grade.tests if not t.passed):
            text = test_output(t, rubric, _diagnosis(grade, t)).replace("\n", "\n      ")
            lines += ["", f"  FAILED {test_name(t)}", f"      {text}"]
    return "\n".join(lines)


def write_json_atomic(path: Path, data: dict) -> None:
    write_atomic(path, json.dumps(data, indent=2))


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one (rename is atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _diagnosis(grade: Grade, test) -> str:
    """Hidden tests carry their part's diagnosis (a hint that needs no test source); public tests
    have their own hints."""
    part = grade.parts.get(test.part)
    return part.diagnosis if part is not None and test.suite == "hidden" else ""
