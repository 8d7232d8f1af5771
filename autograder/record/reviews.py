"""A batch folder's review record: the decisions a person took on grades held for review.

A decision rewrites the student's results file through the one results model (results.decide) and
is kept in GRADES/records/reviews.json (results.RECORDS: no submission's results file can be it)
with the reasons it was taken on and the sha256 of the files it was taken on (the hold's, which the
grade recorded: grade_file.submission_digest). A rerun of the batch (`--force`) applies it again
(reapply) only to a hold of the very same files for the very same reasons; any other hold of that
name is graded afresh and stays held, with a line saying that an earlier decision was not carried and
why: a decision is a person's judgement of the bytes they reviewed, never of a name.
A score set by hand (`review --score`) is kept in GRADES/records/scores.json in the same way: the
part's (or the written question's) points and the note, bound to the sha256 of the files it was set
on. A rerun sets it again on those very files only; on other files the computed score stands, and the
record is kept, listed as not applied (review GRADES lists it, the batch says so) until it is set
again or undone (--unscore).
The `review` command (autograder/cli/review.py) and the batch use it.
"""
from pathlib import Path

from autograder.record import results

REVIEWS_FILE = "reviews.json"
SCORES_FILE = "scores.json"  # name -> {"sha256", "parts": {part: {"points", "note"}}, "written": {...}}
PARTS, WRITTEN = "parts", "written"  # a scores.json entry's parts, and written questions ({"points", "max_score", "note"})
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


def set_scores(out: Path, rubric, name: str, points: dict, note: str, written: dict | None = None) -> results.Results:
    """`name`'s parts and written questions in `points` (part or question -> points) set by hand with
    `note`, on top of those already set by hand on the same files, and recorded with the sha256 of the
    files graded; the new results. `written`: the knowledge check's written questions and their points
    (question -> maximum), which a person scores outside the autograded maximum. ValueError, nothing
    changed, for a name without results, a part or question unknown, points outside its range, a grade
    held and not decided yet (parts only: a written answer is scored whatever the code's grade)."""
    written = written or {}
    unknown = [what for what in points if what not in rubric.parts and what not in written]
    if unknown:
        raise ValueError(f"no part or written question {unknown[0]!r}; the parts: {', '.join(rubric.parts)}; "
                         f"the written questions: {', '.join(written) or 'none with points'}")
    for question, p in points.items():
        if question in written and not 0 <= p <= written[question]:
            raise ValueError(f"written question {question} scores 0 to {written[question]:g}, not {p:g}")
    found = _results_of(out, name)
    kept = _applied(_scores(out).get(name), found)
    for what, p in points.items():
        kind = WRITTEN if what in written else PARTS
        kept[kind][what] = {"points": float(p), "note": note, **({"max_score": written[what]} if what in written else {})}
    return _write_scores(out, rubric, name, found, kept, {"sha256": _digest(found), **kept})


def unset_scores(out: Path, rubric, name: str, which=()) -> results.Results:
    """`name`'s parts and written questions in `which` (every one set by hand when empty) back to what
    the tests gave (a written question: not scored), and dropped from the record; the new results.
    ValueError, nothing changed, for a name without results or one not set by hand."""
    found = _results_of(out, name)
    kept = _scores(out).get(name)
    recorded = _recorded(kept)
    every = {**recorded[PARTS], **recorded[WRITTEN]}
    not_set = [what for what in which if what not in every] or ([] if every else ["any part"])
    if not_set:
        raise ValueError(f"{results.printable(name)} has no score set by hand for {not_set[0]}; "
                         f"set by hand: {', '.join(every) or 'none'}")
    left = {kind: {what: e for what, e in entries.items() if which and what not in which}
            for kind, entries in recorded.items()}
    applied = any(_applied(kept, found).values())
    return _write_scores(out, rubric, name, found, left if applied else _recorded(None),
                         {**kept, **left} if any(left.values()) else None)


def reapply_scores(out: Path, rubric, names) -> dict:
    """After a (re)grade: the scores set by hand applied again to each of `names` graded from the very
    files (whole sha256) they were set on. name -> why they were not applied, for the others (the
    record is kept: review GRADES lists it)."""
    not_applied = {}
    for name, taken in _scores(out).items():
        found = results.load(out / f"{name}.json") if name in names else None
        if found is None or not isinstance(taken, dict):
            continue
        why = scores_not_applied_because(taken, found)
        if why:
            not_applied[name] = why
        else:
            try:
                results.write(out / f"{name}.json", _with_scores(found, rubric, _recorded(taken)))
            except ValueError as err:  # a grade held again, a part no longer graded: the computed score stands
                not_applied[name] = f"scores set by hand not applied: {err}"
    return not_applied


def scores_not_applied_because(taken: dict, found: results.Results) -> str:
    """Why the scores set by hand in `taken` (a scores.json entry) do not apply to `found`; "" when they do."""
    recorded = taken.get("sha256") if isinstance(taken.get("sha256"), str) else ""
    now = _digest(found)
    if not recorded or recorded != now:
        named = ", ".join(what for entries in _recorded(taken).values() for what in entries)
        return (f"scores set by hand ({named}) on files {short(recorded)} not applied: "
                f"the files graded now are {short(now)}; set them again (review --score) or drop them (--unscore)")
    return ""


def hand_scores(out: Path) -> dict:
    """name -> (its scores.json entry, why not applied or "") for each name with scores set by hand."""
    found = {}
    for name, taken in _scores(out).items():
        current = results.load(out / f"{name}.json")
        if isinstance(taken, dict) and current is not None:
            found[name] = (taken, scores_not_applied_because(taken, current))
    return found


def scored_by_hand(taken: dict) -> dict:
    """A scores.json entry's parts and written questions: name -> {"points", "note"}, parts first."""
    recorded = _recorded(taken)
    return {**recorded[PARTS], **recorded[WRITTEN]}


def _recorded(kept) -> dict:
    """A scores.json entry's {PARTS: ..., WRITTEN: ...}, each name -> its entry ({} where it has none)."""
    kept = kept if isinstance(kept, dict) else {}
    return {kind: {what: e for what, e in kept[kind].items() if isinstance(e, dict)}
            if isinstance(kept.get(kind), dict) else {} for kind in (PARTS, WRITTEN)}


def _applied(kept, found: results.Results) -> dict:
    """A scores.json entry's parts and written questions, where it applies to `found`'s files; none
    where it does not (a score set on other files is replaced, never carried)."""
    applies = isinstance(kept, dict) and not scores_not_applied_because(kept, found)
    return _recorded(kept if applies else None)


def _with_scores(found: results.Results, rubric, taken: dict) -> results.Results:
    """`found` with exactly the parts and written questions of `taken` (_recorded's form) set by hand.
    ValueError before anything is written (with_hand_scores' reasons)."""
    untouched = not taken[PARTS] and not any(part.set_by_hand for part in found.parts.values())
    changed = found if untouched else results.with_hand_scores(
        found, rubric, {part: (e["points"], e.get("note", "")) for part, e in taken[PARTS].items()})
    return results.with_written_scores(changed, {q: (e["points"], e.get("max_score", 0.0), e.get("note", ""))
                                                 for q, e in taken[WRITTEN].items()})


def _digest(found: results.Results) -> str:
    return found.graded_with.get("submission", "")


def _write_scores(out: Path, rubric, name: str, found: results.Results, taken: dict, entry: dict | None):
    """`name`'s results with exactly the parts and written questions in `taken` set by hand, and its
    scores.json `entry` (None: dropped); the new results."""
    changed = _with_scores(found, rubric, taken)
    recorded = _scores(out)
    if entry is None:
        recorded.pop(name, None)
    else:
        recorded[name] = entry
    results.write(out / f"{name}.json", changed)
    results.write_record(out, SCORES_FILE, recorded)
    return changed


def _results_of(out: Path, name: str) -> results.Results:
    path = out / f"{name}.json"
    found = results.load(path) if path.is_file() and path.parent == out else None
    if found is None:
        known = ", ".join(sorted(p.stem for p in out.glob("*.json"))) or "none"
        raise ValueError(f"no results for {results.printable(name)!r} in {out}; students with results: {known}")
    return found


def _scores(out: Path) -> dict:
    return results.read_record(out, SCORES_FILE)


def _reviews(out: Path) -> dict:
    return results.read_record(out, REVIEWS_FILE)
