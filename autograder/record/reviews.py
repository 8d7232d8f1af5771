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
        data = results.load(path)
        if data is not None and data["extra_data"].get("held"):
            found[path.stem] = data
    return found


def record(out: Path, name: str, decision: str, note: str = "") -> dict:
    """Apply `decision` to `name`'s held grade, and record it for reruns; the new results."""
    path = out / f"{name}.json"
    data = results.load(path) if path.is_file() and path.parent == out else None
    if data is None:
        raise ValueError(f"no results for {results.printable(name)!r} in {out}")
    hold = data["extra_data"].get("held")
    if not hold:
        raise ValueError(f"{results.printable(name)}'s grade is not held for review")
    decided = results.decide(data, decision, note)
    results.write_json_atomic(path, decided)
    reviews = _reviews(out)
    reviews[name] = {"decision": decision, "reasons": hold["reasons"], "note": note}
    results.write_record(out, REVIEWS_FILE, reviews)
    return decided


def reapply(out: Path, names) -> list:
    """After a (re)grade: the recorded decision applied again to each of `names` whose grade is held
    for the very reasons it was taken on. The names it applied to."""
    reviews = _reviews(out)
    applied = []
    for name in names:
        taken = reviews.get(name)
        data = results.load(out / f"{name}.json") if taken else None
        hold = data["extra_data"].get("held") if data else None
        if hold and hold.get("decision") is None and hold["reasons"] == taken["reasons"]:
            results.write_json_atomic(out / f"{name}.json", results.decide(data, taken["decision"], taken["note"]))
            applied.append(name)
    return applied


def _reviews(out: Path) -> dict:
    return results.read_record(out, REVIEWS_FILE)
