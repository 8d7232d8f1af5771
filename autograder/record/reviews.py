"""A batch folder's review record: the decisions a person took on grades held for review.

A decision rewrites the student's results file through the one results model (results.decide) and
is kept in GRADES/records/reviews.json (results.RECORDS: no submission's results file can be it)
with the reasons it was taken on and the sha256 of the files it was taken on (the hold's, which the
grade recorded: grade_file.submission_digest). A rerun of the batch (`--force`) applies it again
(reapply) only to a hold of the very same files for the very same reasons; any other hold of that
name is graded afresh and stays held, with a line saying that an earlier decision was not carried and
why: a decision is a person's judgement of the bytes they reviewed, never of a name.
The `review` command (autograder/cli/review.py) and the batch use it.
"""
from pathlib import Path

from autograder.record import results

REVIEWS_FILE = "reviews.json"
SHORT_HASH = 12  # hex digits of a sha256 shown to a person; every comparison uses the whole digest
DONE = {"release": "released", "confirm": "confirmed"}


def short(sha256: str) -> str:
    """The sha256 as a person reads it: its first SHORT_HASH hex digits, or words when none is recorded."""
    return f"sha256 {sha256[:SHORT_HASH]}" if sha256 else "sha256 not recorded"


def held(out: Path) -> dict:
    """name -> results of every result in `out` that is or was held for review."""
    found = {}
    for path in sorted(out.glob("*.json")):
        found_results = results.load(path)
        if found_results is not None and found_results.held is not None:
            found[path.stem] = found_results
    return found


def record(out: Path, name: str, decision: str, note: str = "") -> results.Results:
    """Apply `decision` to `name`'s held grade, and record it for reruns with the hold's reasons and
    the sha256 of the files graded; the new results."""
    path = out / f"{name}.json"
    found = results.load(path) if path.is_file() and path.parent == out else None
    if found is None:
        raise ValueError(f"no results for {results.printable(name)!r} in {out}")
    if found.held is None:
        raise ValueError(f"{results.printable(name)}'s grade is not held for review")
    decided = results.decide(found, decision, note)
    results.write(path, decided)
    reviews = _reviews(out)
    reviews[name] = {"decision": decision, "reasons": list(found.held.reasons), "sha256": found.held.sha256,
                     "note": note}
    results.write_record(out, REVIEWS_FILE, reviews)
    return decided


def reapply(out: Path, names) -> list:
    """After a (re)grade: the recorded decision applied again to each of `names` whose grade is held
    for the very reasons it was taken on, of files with the very sha256 it was taken on. Every other
    hold of a name with a recorded decision stays held, and its results say why the decision was not
    carried (not_carried). The names it applied to."""
    reviews = _reviews(out)
    applied = []
    for name in names:
        taken = reviews.get(name)
        found = results.load(out / f"{name}.json") if isinstance(taken, dict) else None
        hold = found.held if found else None
        if not hold or hold.decision is not None:
            continue
        why = not_carried_because(taken, hold)
        if why:
            results.write(out / f"{name}.json", results.hold_not_carried(found, why))
        else:
            results.write(out / f"{name}.json", results.decide(found, taken["decision"], taken.get("note", "")))
            applied.append(name)
    return applied


def not_carried_because(taken: dict, hold: results.Hold) -> str:
    """Why the decision `taken` (a reviews.json entry) does not apply to `hold`; "" when it does: the
    same whole sha256 (recorded on both) and the same reasons."""
    recorded = taken.get("sha256") if isinstance(taken.get("sha256"), str) else ""
    if taken.get("decision") not in results.REVIEW_DECISIONS or not recorded:
        return ("an earlier decision was not carried: its record does not name both the decision and the "
                "files reviewed (their sha256); review this grade afresh")
    earlier = f"an earlier decision ({DONE[taken['decision']]} after review, of files {short(recorded)}) was not carried"
    if hold.sha256 != recorded:
        return f"{earlier}: the files changed since (now {short(hold.sha256)}); review this version afresh"
    if list(hold.reasons) != taken.get("reasons"):
        return f"{earlier}: the same files are held for other reasons now; review them afresh"
    return ""


def not_carried(out: Path, names) -> dict:
    """name -> why a recorded decision was not carried to its hold, for each of `names` that has one."""
    found = {name: results.load(out / f"{name}.json") for name in names}
    return {name: r.held.not_carried for name, r in found.items() if r and r.held and r.held.not_carried}


def _reviews(out: Path) -> dict:
    return results.read_record(out, REVIEWS_FILE)
