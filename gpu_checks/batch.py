"""Timing alone, for courses that grade elsewhere (Gradescope has no GPUs), merged into their results.

It times a folder of submissions on a GPU machine, then merges the timing rows into results made
elsewhere.

    python -m gpu_checks batch SUBMISSIONS --out TIMING_DIR [--device cuda|cpu] [--isolation auto] [--force]
    python -m gpu_checks merge TIMING_DIR RESULTS_DIR

`batch` writes TIMING_DIR/<name>.json per submission (names as `autograder grade --batch` gives them),
atomically and only once the session is over, so an existing valid file means done: a killed batch
is rerun with the same command. Submissions are timed one after another (timings on one device must
not overlap). A fault of the grading machine (no GPU, CUDA out of the sandbox's reach) stops the
batch without writing a file: it is nobody's verdict.

`merge` finds each timed submission's results.json in RESULTS_DIR, either RESULTS_DIR/<name>.json (a
`grade --batch` results folder) or RESULTS_DIR/<name>/results.json (one folder per submission, as a
Gradescope export lays them out), and replaces its timing row and part through the results model
(results.with_part): the file becomes the one `grade` would have written with that timing (totals in
whole units, a late penalty taken of the new total, the summary drawn again). Merging again changes
nothing. A grade held for review, and a late grade from a grader that did not keep the penalty's
share, are not merged (they say why). A results folder's grades.csv is rebuilt.
"""
import json
import tempfile
import time
from pathlib import Path

from autograder.intake.submission import GradingError
from autograder.intake.submission import load as load_submission
from autograder.pipeline import grading
from autograder.record import results
from autograder.runners.slot import discover
from gpu_checks.grading import grade_timing, no_cuda_reason, resolve_device
from gpu_checks.session import TimingSetupError

TIMING_FIELDS = {"submission": str, "status": str, "score": (int, float), "max_score": (int, float),
                 "output": str, "device": (str, type(None)), "isolation": str}
STATUSES = ("passed", "failed", "skipped")
TIMING_TAG = "timing"  # the rubric part, and the tag of its row in results.json
DEVICE_NAMES = {"cuda": "CUDA", "cpu": "CPU", None: "not timed"}  # as `grade` names its timing row


def load_timing(path: Path) -> dict | None:
    """A per-submission timing file if it is complete and well-formed, else None (time it again)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(data, dict) and all(isinstance(data.get(k), t) for k, t in TIMING_FIELDS.items())
          and data["status"] in STATUSES and data["device"] in DEVICE_NAMES)
    return data if ok else None


def time_folder(folder: Path, out: Path, rubric, isolation, device: str, force: bool = False, log=print) -> int:
    """The `batch` command: exit status 0 when every submission has a timing file, 1 otherwise."""
    try:
        device = resolve_device(device)
    except TimingSetupError as err:
        log(f"cannot time here: {err}; --device cpu times on the CPU")
        return 1
    if device is None:
        log(f"cannot time here: {no_cuda_reason()}; --device cpu times on the CPU")
        return 1
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    submissions = discover(Path(folder))
    todo = [s for s in submissions if force or load_timing(out / f"{s.name}.json") is None]
    log(f"{len(submissions) - len(todo)} of {len(submissions)} submissions already timed (--force times them again)")
    hidden = [Path(folder).resolve(), out]  # no submission may see the others or their timings
    for number, sub in enumerate(todo, 1):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="mhsa-timing-") as workdir:
            try:
                source = load_submission(sub.path, Path(workdir)).source
            except GradingError as err:
                result = {"status": "failed", "score": 0.0, "max_score": rubric.parts["timing"].points,
                          "output": f"Timing: failed. This submission could not be read: {err}", "device": device}
            else:
                try:
                    result = grade_timing(source, rubric, isolation, hidden=hidden, device=device)
                except TimingSetupError as err:
                    log(f"stopped: the timing check cannot run on this machine ({err}). Nothing was written for "
                        f"{sub.name}; fix the machine and rerun the same command.")
                    return 1
        record = {"submission": sub.name, **result, "isolation": isolation.level,
                  "seconds": round(time.monotonic() - started, 1)}
        results.write_json_atomic(out / f"{sub.name}.json", record)
        log(f"[{number}/{len(todo)}] {sub.name}: {result['status']}, {result['score']:g} / {result['max_score']:g} "
            f"on {result['device']} ({record['seconds']} s)")
    return 0


def merge_folder(timing_dir: Path, results_dir: Path, rubric, log=print) -> int:
    """The `merge` command: exit status 0 when every timing file found its results.json and merged."""
    timing_dir, results_dir = Path(timing_dir), Path(results_dir)
    merged, problems = [], []
    for timing_file in sorted(timing_dir.glob("*.json")):
        timing = load_timing(timing_file)
        if timing is None:
            problems.append(f"{timing_file.name}: not a complete timing file (rerun the timing batch)")
            continue
        target = results_file(results_dir, timing["submission"])
        found = results.load(target) if target else None
        if found is None:
            problems.append(f"{timing['submission']}: no valid results.json in {results_dir}")
            continue
        try:
            merged_results = with_timing(found, timing, rubric)
        except ValueError as why:
            problems.append(f"{timing['submission']}: {why}")
            continue
        results.write(target, merged_results)
        merged.append(timing["submission"])
    if (results_dir / results.GRADES_CSV).exists():
        results.write_grades_csv(results_dir, [p.stem for p in sorted(results_dir.glob("*.json"))], rubric)
    log(f"merged timing into {len(merged)} results file(s) in {results_dir}")
    for problem in problems:
        log(f"not merged: {problem}")
    return 1 if problems else 0


def results_file(results_dir: Path, name: str) -> Path | None:
    for candidate in (results_dir / f"{name}.json", results_dir / name / results.RESULTS_FILE):
        if candidate.is_file():
            return candidate
    return None


def with_timing(found: results.Results, timing: dict, rubric) -> results.Results:
    """The results with their timing row and part replaced by `timing`'s, made as `grade` makes them
    (grading.timing_part) and put in by the results model (results.with_part: totals in whole units,
    the late penalty taken again, the summary drawn again); a pure function, so merging the same
    timing twice gives the same file. ValueError for results it cannot merge into, saying why."""
    if TIMING_TAG not in rubric.parts:
        raise ValueError(f"the rubric has no [parts.{TIMING_TAG}]: merge with the rubric the course grades with")
    row, part = grading.timing_part(timing, rubric.parts[TIMING_TAG], DEVICE_NAMES[timing["device"]])
    merged = {"device": timing["device"], "isolation": timing["isolation"], "status": timing["status"]}
    return results.with_part(found, rubric, part, row, extra={"timing_merged": merged})
