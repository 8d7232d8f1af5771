"""benchmarks/same_grades.py, the check that a change leaves every grade as it was: its normalizer
keeps everything a grade decides and removes only what varies between two grades of the same file,
its comparison fails on any change of a grade, and a grader slot (the batch) grades a few files
exactly as a fresh `grade` does."""
import copy
import importlib.util
import io
import json
from pathlib import Path

import pytest

from autograder.core.paths import REPO

spec = importlib.util.spec_from_file_location("same_grades", REPO / "benchmarks" / "same_grades.py")
same = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same)

# The shape of a results.json (results.to_gradescope): one graded test, one failed with a message,
# a not-graded row, a part with a diagnosis, a hold.
RESULTS = {
    "score": 0.0, "execution_time": 4.27,
    "output": "Score: 0 / 90  (isolation: sandbox)\nHELD FOR REVIEW: ...", "visibility": "visible",
    "stdout_visibility": "hidden",
    "tests": [
        {"name": "sdpa (public): sdpa::test_matches_formula[3d]", "score": 0.3334, "max_score": 0.3334,
         "status": "passed", "output": "", "visibility": "visible", "tags": ["sdpa", "public"]},
        {"name": "masks (public): masks::test_causal", "score": 0.0, "max_score": 0.5, "status": "failed",
         "output": "causal_mask(3) returned the wrong values", "visibility": "visible", "tags": ["masks", "public"]},
        {"name": "Timing", "output": "CUDA timing skipped", "visibility": "visible", "tags": ["timing"]},
    ],
    "extra_data": {
        "submission": "alice", "status": "held", "max_score": 90.0, "isolation": "sandbox",
        "suites": ["public", "hidden"], "seeds": "crc32",
        "parts": {"masks": {"score": 10.0, "max_score": 15.0, "graded": True, "notes": [],
                            "diagnosis": "the mask is transposed"}},
        "adjustments": [], "forbidden": [], "notes": [], "flags": [], "printed_output": "hello",
        "graded_with": {"grader": "068a1fabeae1f625", "rubric": "5d41402abc4b2a76", "submission": "b1946ac92492d234"},
        "held": {"reasons": ["imports ctypes"], "parts": ["masks"], "withheld": True, "released_score": 85.0,
                 "confirmed_score": 75.0, "decision": None},
    },
}


def digest(results, source=b"x = 1\n", options=("--suite", "all")) -> dict:
    return {"route": "grade", "commit": "c", "checkout": str(CHECKOUT), "corpora": ["mutants"], "files": {
        "mutants/one": {"source_sha256": same.hashlib.sha256(source).hexdigest(), "options": list(options),
                        "results": same.normalize(results, CHECKOUT)}}}


def compared(a, b) -> tuple:
    out = io.StringIO()
    return same.compare(a, b, out), out.getvalue()


CHECKOUT = Path("/tmp/before-25")


def test_the_normalizer_removes_only_the_time_the_graders_checksum_the_checkouts_path_and_pids():
    results = copy.deepcopy(RESULTS)
    quoted = ["cheat: no hidden tests at /tmp/before-25: the grader does not allow access to "
              "/tmp/before-25/tests_hidden",
              "cheat: no other checkout: '/tmp/mhsa-adversarial-checkout/reference/mhsa.py'",
              "another checkout: /tmp/before-25x/reference",
              "importing your mhsa.py raised PermissionError: [Errno 13] Permission denied: '/proc/5590/cwd'"]
    results["extra_data"]["notes"] = quoted
    normalized = same.normalize(results, CHECKOUT)
    assert "execution_time" not in normalized
    assert normalized["extra_data"]["notes"] == [
        "cheat: no hidden tests at <checkout>: the grader does not allow access to <checkout>/tests_hidden",
        *quoted[1:3], "importing your mhsa.py raised PermissionError: [Errno 13] Permission denied: '/proc/<pid>/cwd'"]
    results.pop("execution_time")
    results["extra_data"]["graded_with"].pop("grader")
    results["extra_data"]["notes"] = normalized["extra_data"]["notes"]
    assert normalized == results, "the normalizer changed something a grade decides"


def test_the_graders_own_checksum_and_a_temporary_folders_random_name_are_not_what_it_decided():
    """Two graders always differ in the checksum of their own files; which name tempfile drew for the
    worker template's folder, and which thread id a worker's thread got, are the machine's. The rest
    of graded_with, and any other path, stay."""
    results = copy.deepcopy(RESULTS)
    results["extra_data"]["printed_output"] = (
        "/tmp/mhsa-template-5pjsdtwi/mhsa-worker-dt0bl8v9/mhsa.py:173: FutureWarning\n"
        "cheat: could not forge /tmp/mhsa-same-grades-hlu11ugo/results/results.json\n"
        "cheat: mount table refused (/proc/5590/task/8217/mounts: Permission denied)\n"
        "cheat: /tmp/other and /tmp/mhsa-template-x stay")
    normalized = same.normalize(results, CHECKOUT)
    assert normalized["extra_data"]["graded_with"] == {"rubric": "5d41402abc4b2a76", "submission": "b1946ac92492d234"}
    assert normalized["extra_data"]["printed_output"] == (
        "/tmp/mhsa-template-<random>/mhsa-worker-<random>/mhsa.py:173: FutureWarning\n"
        "cheat: could not forge /tmp/mhsa-same-grades-<random>/results/results.json\n"
        "cheat: mount table refused (/proc/<pid>/task/<tid>/mounts: Permission denied)\n"
        "cheat: /tmp/other and /tmp/mhsa-template-x stay")
    elsewhere = copy.deepcopy(results)
    elsewhere["extra_data"]["graded_with"]["grader"] = "bfa6e4fe87396b63"
    elsewhere["extra_data"]["printed_output"] = (
        "/tmp/mhsa-template-b08bt8h4/mhsa-worker-e2v595yo/mhsa.py:173: FutureWarning\n"
        "cheat: could not forge /tmp/mhsa-same-grades-_idactnd/results/results.json\n"
        "cheat: mount table refused (/proc/9594/task/9594/mounts: Permission denied)\n"
        "cheat: /tmp/other and /tmp/mhsa-template-x stay")
    assert same.normalize(elsewhere, CHECKOUT) == normalized
    assert same.normalize(normalized, CHECKOUT) == normalized, "applying it twice changes nothing"
    for decided in ({"rubric": "another"}, {"submission": "another"}):
        changed = copy.deepcopy(results)
        changed["extra_data"]["graded_with"].update(decided)
        assert same.normalize(changed, CHECKOUT) != normalized


def test_a_digest_recorded_before_a_rule_was_added_is_compared_under_it():
    """compare normalizes both sides again: an older digest kept the grader's checksum."""
    before, after = copy.deepcopy(RESULTS), copy.deepcopy(RESULTS)
    after["extra_data"]["graded_with"]["grader"] = "bfa6e4fe87396b63"
    old = digest(before)
    old["files"]["mutants/one"]["results"] = json.loads(json.dumps(before))  # as an older normalizer left it
    old["files"]["mutants/one"]["results"].pop("execution_time")
    code, text = compared(old, digest(after))
    assert code == 0 and "1 identical, 0 different" in text


def test_the_environment_inside_a_checkout_keeps_its_path(monkeypatch):
    """The coordinator records /work/main, whose .venv runs both checkouts: a message that quotes
    torch's files must read the same from either."""
    monkeypatch.setattr(same.sys, "prefix", "/work/main/.venv")
    text = 'File "/work/main/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py" in /work/main/reference'
    assert same.normalize({"output": text}, Path("/work/main"))["output"] == \
        'File "/work/main/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py" in <checkout>/reference'


def test_a_digest_is_read_back_as_written(tmp_path):
    for name in ("d.json", "d.json.gz"):
        same.save(digest(RESULTS), tmp_path / name)
        assert same.load(tmp_path / name) == digest(RESULTS)


def test_two_grades_that_differ_only_in_what_varies_compare_identical():
    other = copy.deepcopy(RESULTS)
    other["execution_time"] = 9.9
    code, text = compared(digest(RESULTS), digest(other))
    assert code == 0 and "1 identical, 0 different" in text


@pytest.mark.parametrize("change, shown", [
    (lambda r: r.update(score=1.0), "score: 0.0 -> 1.0"),
    (lambda r: r["tests"][1].update(status="passed"), "masks::test_causal.status: \"failed\" -> \"passed\""),
    (lambda r: r["tests"][1].update(output="another message"), "masks::test_causal.output"),
    (lambda r: r["tests"][0].update(score=0.0), "test_matches_formula[3d].score"),
    (lambda r: r["tests"].pop(2), "tests.Timing: only in A"),
    (lambda r: r["tests"].reverse(), "the same rows in another order"),
    (lambda r: r["extra_data"]["parts"]["masks"].update(diagnosis=""), "parts.masks.diagnosis"),
    (lambda r: r["extra_data"].update(status="graded"), "extra_data.status"),
    (lambda r: r["extra_data"]["held"]["reasons"].append("a thread"), "held.reasons"),
    (lambda r: r["extra_data"].update(printed_output=""), "printed_output"),
    (lambda r: r.update(output="Score: 0 / 90"), "output"),
    (lambda r: r["extra_data"].update(isolation="process"), "isolation"),
], ids=["score", "test-status", "test-output", "test-score", "row-gone", "row-order", "diagnosis", "status",
        "held-reasons", "printed-output", "output-text", "isolation"])
def test_any_change_of_what_a_grade_decides_fails_the_comparison(change, shown):
    other = copy.deepcopy(RESULTS)
    change(other)
    code, text = compared(digest(RESULTS), digest(other))
    assert code == 1 and "0 identical, 1 different" in text
    assert shown in text, text


def test_a_changed_input_or_a_missing_file_is_not_counted_identical():
    code, text = compared(digest(RESULTS), digest(RESULTS, source=b"x = 2\n"))
    assert code == 1 and "1 input changed" in text
    code, text = compared(digest(RESULTS), {"route": "batch", "commit": "c", "corpora": ["mutants"], "files": {}})
    assert code == 1 and "mutants/one: only in A" in text


def test_only_the_corpora_both_digests_recorded_are_compared():
    whole = digest(RESULTS)
    whole["corpora"].append("nbgrader")
    whole["files"]["nbgrader/1001"] = whole["files"]["mutants/one"]
    code, text = compared(whole, digest(RESULTS))
    assert code == 0 and "1 identical" in text and "recorded in one digest only: nbgrader" in text
    other = digest(RESULTS)
    other["corpora"] = ["nbgrader"]
    code, text = compared(digest(RESULTS), other)
    assert code == 1 and "corpora compared: none" in text, "nothing compared is not a success"


def test_a_slot_grades_a_few_files_as_a_fresh_grade_does(tmp_path):
    """The two routes on this checkout: a mutant (failed tests and their messages), an adversarial
    case that raises, and an empty notebook (a grade that cannot be made: the failure writer)."""
    from tools.corpus import load_mutants

    mutant = next(m for m in load_mutants(same.REPO / "corpus" / "mutants.toml") if m.parts == ("masks",))
    adversarial = {key: file for group in same.adversarial_groups() for key, file in group.files.items()}
    case = "adversarial/exception"
    files = {f"mutants/{mutant.id}": (f"{mutant.id}.py", mutant.source().encode()), case: adversarial[case],
             "nbgrader/empty": ("empty.ipynb", b"")}
    groups = {"few": lambda: [same.Group(("--suite", "public", "--isolation", "auto", "--timeout", "6"), files)]}
    fresh = same.record(REPO, "grade", ["few"], groups_of=groups)
    slots = same.record(REPO, "batch", ["few"], groups_of=groups)
    code, text = compared(fresh, slots)
    assert code == 0, text
    statuses = {key: f["results"]["extra_data"]["status"] for key, f in fresh["files"].items()}
    assert statuses == {f"mutants/{mutant.id}": "graded", case: "graded", "nbgrader/empty": "error"}
    assert fresh["files"][f"mutants/{mutant.id}"]["results"]["extra_data"]["parts"]["masks"]["score"] < 15


def test_a_known_race_excuses_only_its_own_text():
    """large_output's printed output (the worker's dying traceback races its kill) may differ; its
    score may not, nor may the printed output of any other case."""
    def pair(key, change):
        a, b = digest(RESULTS), digest(RESULTS)
        b["files"]["mutants/one"]["results"] = same.normalize(change(copy.deepcopy(RESULTS)), CHECKOUT)
        for d in (a, b):
            d["files"], d["corpora"] = {key: d["files"]["mutants/one"]}, [key.split("/")[0]]
        return compared(a, b)

    traceback = lambda r: r["extra_data"].update(printed_output="Traceback (most recent call last):") or r  # noqa: E731
    code, text = pair("adversarial/large_output@process", traceback)
    assert code == 0 and "1 raced text only" in text and "a known race" in text and "printed_output" in text
    code, text = pair("adversarial/large_output", lambda r: traceback(r).update(score=1.0) or r)
    assert code == 1 and "1 different" in text
    code, text = pair("adversarial/exception", traceback)
    assert code == 1 and "1 different" in text
