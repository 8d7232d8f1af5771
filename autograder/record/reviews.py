"""A batch folder's review record: the decisions a person took on grades held for review.

A decision rewrites the student's results file through the one results model (results.decide) and
is kept in GRADES/records/reviews.json (results.RECORDS: no submission's results file can be it)
with the reasons it was taken on, so that a rerun of the batch (`--force`) applies it again to the
same hold (reapply); a changed submission whose hold has other reasons is held again, for a new look.
The `review` command (autograder/cli/review.py) and the batch use it.
"""
from pathlib import Path

from autograder.record import results

REVIEWS_FILE = "reviews.json"


def held(out: Path) -> dict:
    """name -> results of every result in `out` that is or was held for review."""
    found = {}
    for path in sorted(out.glob("*.json")):
        found_results = results.load(path)
        if found_results is not None and found_results.held is not None:
            found[path.stem] = found_results
    return found


def record(out: Path, name: str, decision: str, note: str = "") -> results.Results:
    """Apply `decision` to `name`'s held grade, and record it for reruns; the new results."""
    path = out / f"{name}.json"
    found = results.load(path) if path.is_file() and path.parent == out else None
    if found is None:
        raise ValueError(f"no results for {results.printable(name)!r} in {out}")
    if found.held is None:
        raise ValueError(f"{results.printable(name)}'s grade is not held for review")
    decided = results.decide(found, decision, note)
    results.write(path, decided)
    reviews = _reviews(out)
    reviews[name] = {"decision": decision, "reasons": list(found.held.reasons), "note": note}
    results.write_record(out, REVIEWS_FILE, reviews)
    return decided


def reapply(out: Path, names) -> list:
    """After a (re)grade: the recorded decision applied again to each of `names` whose grade is held
    for the very reasons it was taken on. The names it applied to."""
    reviews = _reviews(out)
    applied = []
    for name in names:
        taken = reviews.get(name)
        found = results.load(out / f"{name}.json") if taken else None
        hold = found.held if found else None
        if hold and hold.decision is None and list(hold.reasons) == taken["reasons"]:
            results.write(out / f"{name}.json", results.decide(found, taken["decision"], taken["note"]))
            applied.append(name)
    return applied


def _reviews(out: Path) -> dict:
    return results.read_record(out, REVIEWS_FILE)
