"""A review decision is bound to the bytes reviewed: `review --release` records the sha256 of the files
graded, and a rerun (`grade --batch --force`) carries the decision only to those very files held for
the very same reasons. The replay attack it closes: an honest file held for review is released, the
student hands in a different file whose hold reads the same, and the rerun would have released it too.

Everything runs as a TA types it, `python -m autograder ...` in a subprocess, on one batch: alice's
file is replaced after the release, bob's is left as it was."""
import hashlib
import json
import subprocess
import sys

import pytest

from autograder.core.paths import REFERENCE, REPO
from tests import fresh_machine

# Held today and meant to stay held (docs/decisions.md, "What goes to a person"): ctypes reaches into
# the interpreter. Unused here: the honest reference plus a curiosity a person releases in a minute.
HELD_IMPORT = "\nimport ctypes\n"
# Another file whose hold reads exactly the same (same line, same reason): the same sdpa computed
# otherwise on the same line. It stands for any file a student hands in after an honest one was released.
HONEST_LINE = "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Lq, Lk)\n"
OTHER_LINE = "    scores = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5  # not what was reviewed\n"


def autograder(*args):
    """`python -m autograder ARGS` in the checkout, as typed on a fresh machine; asserted to exit 0."""
    result = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=REPO, capture_output=True,
                            text=True, timeout=600, env=fresh_machine.ENV)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    return result.stdout + result.stderr


def results_of(out, name):
    return json.loads((out / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """Both held, both released, alice's file replaced, the batch rerun with --force; what each step left."""
    tmp = tmp_path_factory.mktemp("binding")
    subs, out = tmp / "subs", tmp / "grades"
    subs.mkdir()
    honest = REFERENCE.read_text() + HELD_IMPORT
    assert HONEST_LINE in honest, "the reference's sdpa line moved: update HONEST_LINE"
    for name in ("alice", "bob"):
        (subs / f"{name}.py").write_text(honest)
    grade = ("grade", subs, "--batch", "--out", out, "--suite", "public", "--jobs", "2")
    autograder(*grade)
    first = {name: results_of(out, name) for name in ("alice", "bob")}
    listing_held = autograder("review", out)
    released = {name: autograder("review", out, "--release", name, "--note", "ctypes imported, never used")
                for name in ("alice", "bob")}
    listing_released = autograder("review", out)
    reviewed = json.loads((out / "records" / "reviews.json").read_text())

    replaced = honest.replace(HONEST_LINE, OTHER_LINE)
    (subs / "alice.py").write_text(replaced)
    rerun = autograder(*grade, "--force")
    return {"out": out, "first": first, "listing_held": listing_held, "released": released,
            "listing_released": listing_released, "reviewed": reviewed, "rerun": rerun,
            "after": {name: results_of(out, name) for name in ("alice", "bob")},
            "listing_after": autograder("review", out),
            "sha": {"honest": hashlib.sha256(honest.encode()).hexdigest(),
                    "replaced": hashlib.sha256(replaced.encode()).hexdigest()}}


def test_a_decision_on_one_file_is_not_carried_to_another_file_held_for_the_same_reasons(story):
    first, after = story["first"]["alice"], story["after"]["alice"]
    assert first["extra_data"]["status"] == "held" and first["score"] == 0
    assert after["extra_data"]["held"]["reasons"] == first["extra_data"]["held"]["reasons"], \
        "the replaced file must be held with the same text, or this is not the replay attack"
    assert after["extra_data"]["status"] == "held" and after["score"] == 0, "the replaced file was released"
    held = after["extra_data"]["held"]
    assert held["decision"] is None and "note" not in held
    assert held["sha256"] == story["sha"]["replaced"] != story["sha"]["honest"]
    short_honest, short_now = story["sha"]["honest"][:12], story["sha"]["replaced"][:12]
    why = held["not_carried"]
    assert why.startswith("an earlier decision (released after review") and "was not carried" in why, why
    assert "the files changed" in why and short_honest in why and short_now in why, why
    assert f"alice: held again; {why}" in story["rerun"], story["rerun"]
    assert "held for review: alice" in story["rerun"], story["rerun"]
    assert f"alice: HELD;" in story["listing_after"] and why in story["listing_after"], story["listing_after"]
    assert story["reviewed"]["alice"]["sha256"] == story["sha"]["honest"], "the record keeps what was reviewed"


def test_the_same_file_rerun_keeps_its_decision(story):
    before, after = story["first"]["bob"], story["after"]["bob"]
    assert after["extra_data"]["status"] == "graded" and after["score"] == before["extra_data"]["held"]["released_score"] > 0
    held = after["extra_data"]["held"]
    assert held["decision"] == "release" and held["note"] == "ctypes imported, never used"
    assert held["sha256"] == story["sha"]["honest"] and "not_carried" not in held
    assert "bob: held again" not in story["rerun"] and "bob: released;" in story["listing_after"]


def test_the_hash_of_what_was_graded_is_in_the_results_the_record_and_the_listing(story):
    short = story["sha"]["honest"][:12]
    for name in ("alice", "bob"):
        assert story["first"][name]["extra_data"]["held"]["sha256"] == story["sha"]["honest"]
        assert story["first"][name]["extra_data"]["graded_with"]["submission"] == story["sha"]["honest"]
        assert story["reviewed"][name]["sha256"] == story["sha"]["honest"]
        assert f"{name}: HELD;" in story["listing_held"] and f"{name}: released;" in story["listing_released"]
        assert f"(sha256 {short})" in story["released"][name], story["released"][name]
    assert story["listing_held"].count(f"files sha256 {short}\n") == 2, story["listing_held"]
    assert f"files sha256 {story['sha']['replaced'][:12]}" in story["listing_after"], story["listing_after"]
