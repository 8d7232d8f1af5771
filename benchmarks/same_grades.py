"""Same grades before and after: a digest of what a checkout's grader decides on the fixed corpora,
and a comparison of two digests.

    python benchmarks/same_grades.py record --checkout DIR --route grade --out A.json
    python benchmarks/same_grades.py record --checkout DIR --route batch --out B.json [--corpus mutants,adversarial]
    python benchmarks/same_grades.py compare A.json B.json      # exit 0 when every grade is identical

`record` grades every file of the chosen corpora with the grader of the checkout DIR (a worktree of
this repository at any commit; default this one), running that checkout's own code: `python -m
autograder ...` with cwd and PYTHONPATH = DIR. The inputs are always built from THIS tree's corpora,
so that two checkouts are compared on the same files (each file's sha256 is recorded: `compare`
says when an input itself changed). Routes:
    grade   one fresh `python -m autograder grade FILE --results R` per file (what a TA types, and
            what the nbgrader gradebook runs per notebook)
    batch   `python -m autograder grade FOLDER --batch --out OUT --jobs 2`: the grader slots
Both routes give the grader the same options, the submissions' folder hidden included (a batch hides
it from every child; the lone grade gets it as --hide), so that the route is the only difference.

Corpora (docs/benchmarks/same-grades.md):
    mutants      corpus/mutants.toml (tools.corpus.load_mutants), full suites
    adversarial  examples/adversarial, as tests/test_adversarial.py grades it: the public suite, a 6 s
                 call limit (or the case's call_timeout_s), at the strongest level (auto) and, for the
                 cases the manifest marks `process`, also at the process level
    nbgrader     the simulated class of tests/test_nbgrader_course.py as notebooks, graded as the
                 gradebook's isolated pass grades them (--after-due-date, full suites)
    mutants-styles, mutants-heldout   the other mutant manifests (not in the default selection)
"""
import argparse
import difflib
import hashlib
import importlib.util
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_CORPORA = ("mutants", "adversarial", "nbgrader")
ROUTES = ("grade", "batch")
# tests/test_adversarial.py's call limit (its FAST rubric). Its shorter import limit (30 s) and memory
# limit (3 GB) are rubric values the command line cannot set: a recorded grade uses the checkout's
# rubric.toml for them (60 s, 6 GB), the same on both routes and in both checkouts.
ADVERSARIAL_CALL_TIMEOUT = 6.0
OTHER_CHECKOUT = Path("/tmp/mhsa-adversarial-checkout")  # what the other_checkout case looks for (as in its test)


@dataclass(frozen=True)
class Group:
    """Files graded with the same options: one folder, one batch."""
    options: tuple        # `grade` options beyond the path, --results and --hide
    files: dict           # key in the digest -> (file name, source bytes)


# --- the corpora (always built from this tree) -------------------------------------------------

def mutant_groups(manifest: str) -> list:
    from tools.corpus import load_mutants
    from autograder.core.paths import CORPUS

    mutants = load_mutants(CORPUS / f"{manifest}.toml")
    files = {f"{manifest}/{m.id}": (f"{m.id}.py", m.source().encode()) for m in mutants}
    return [Group(("--suite", "all", "--isolation", "auto"), files)]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def adversarial_groups() -> list:
    cases = _load("adversarial_build", REPO / "examples" / "adversarial" / "build.py").cases()
    groups = {}
    for level in ("auto", "process"):
        for case in cases:
            if level == "process" and not case.process:
                continue
            timeout = case.call_timeout_s or ADVERSARIAL_CALL_TIMEOUT
            key = f"adversarial/{case.name}" + ("" if level == "auto" else f"@{level}")
            options = ("--suite", "public", "--isolation", level, "--timeout", f"{timeout:g}")
            groups.setdefault(options, {})[key] = (f"{case.name}.py", case.source().encode())
    return [Group(options, files) for options, files in groups.items()]


def nbgrader_groups() -> list:
    """The class of tests/test_nbgrader_course.py, built by benchmarks/gradebook.py (course_with_class): the
    release comes from `nbgrader generate_assignment` on a copy of the course. The cheapest honest
    form of the simulation for a digest: the same notebooks graded the way the gradebook's isolated
    pass grades them (`grade NOTEBOOK --after-due-date --hide COURSE`), without nbgrader's own
    autograde, export and database (which do not change with the grader's code)."""
    gradebook = _load("gradebook_benchmark", REPO / "benchmarks" / "gradebook.py")
    scratch = Path(tempfile.mkdtemp(prefix="mhsa-same-grades-nb-"))
    try:
        _, _, notebooks = gradebook.course_with_class(scratch, lambda args, cwd: subprocess.run(
            [sys.executable, "-m", *args], cwd=cwd, check=True, capture_output=True))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    files = {f"nbgrader/{student}": (f"s{student}.ipynb", content) for student, content in sorted(notebooks.items())}
    return [Group(("--suite", "all", "--isolation", "auto", "--after-due-date"), files)]


def correct_groups() -> list:
    """Correct work in every style and habit the project holds: the reference, corpus/valid and
    corpus/styles (other ways to write it), corpus/honest and corpus/honest_outside (students' habits:
    prints, plots, seeds, magics; the second written by people who never saw the grader's rules).
    A change to how points are shared between parts must leave each of these grades as it was."""
    from autograder.core.paths import CORPUS

    sources = [REPO / "reference" / "mhsa.py"] + [
        path for folder in ("valid", "styles", "honest", "honest_outside")
        for path in sorted((CORPUS / folder).iterdir()) if path.suffix in (".py", ".ipynb") and path.name != "build.py"]
    files = {f"correct/{path.parent.name}/{path.name}": (f"{path.parent.name}-{path.name}", path.read_bytes())
             for path in sources}
    return [Group(("--suite", "all", "--isolation", "auto"), files)]


CORPORA = {"mutants": lambda: mutant_groups("mutants"), "adversarial": adversarial_groups,
           "nbgrader": nbgrader_groups, "correct": correct_groups, "mutants-styles": lambda: mutant_groups("mutants-styles"),
           "mutants-heldout": lambda: mutant_groups("mutants-heldout")}


# --- what a grade decides ----------------------------------------------------------------------

CHECKOUT_MARK = "<checkout>"


def checkout_path(checkout: Path) -> re.Pattern:
    """The checkout's absolute path where a text quotes it (a process-level worker is refused a
    file of the repository, a traceback through the worker's own files): where a checkout lives is
    not what its grader decides, and a before/after comparison runs two checkouts in two places.
    The Python environment's own path is left alone when it lies inside the checkout (/work/main/.venv):
    both checkouts run the same environment, so a message quoting torch's files stays comparable."""
    checkout = Path(checkout).resolve()
    guard = ""
    environment = Path(sys.prefix)
    if environment.is_relative_to(checkout) and environment != checkout:
        guard = f"(?!{re.escape(str(environment)[len(str(checkout)):])}(?![\\w.-]))"
    return re.compile(re.escape(str(checkout)) + guard + r"(?![\w.-])")


# A process or thread id in a path of /proc that a message quotes (a process-level worker refused
# /proc/<its pid>/cwd, /proc/<pid>/task/<tid>/mounts): which number the system gave the worker is not
# what the grader decided.
PROC_PID = re.compile(r"(?<=/proc/)(?:\d+|<pid>)(/task/\d+)?(?=/)")  # <pid>: an older digest


def _proc_ids(found: re.Match) -> str:
    return "<pid>/task/<tid>" if found[1] else "<pid>"


# The random part of a temporary folder's name (tempfile: 8 of [a-z0-9_]) that a text quotes: the
# worker template's folder and its workers' at the process level, this script's own scratch. Which
# name was drawn is not what the grader decided.
TEMPORARY_NAME = re.compile(r"\b(mhsa-(?:template|worker|same-grades(?:-nb)?)-)[a-z0-9_]{8}(?![\w.-])")


def normalize(results: dict, checkout: Path) -> dict:
    """results.json less what varies between two grades of the same file: `execution_time` (the
    grade's wall time, which the machine's load decides); the grader's own checksum
    (`extra_data.graded_with.grader`: it names the grader's files, so that another grader regrades a
    kept grade, and two graders compared always differ there); and, in texts, the checkout's path
    (checkout_path), process and thread ids in /proc paths (PROC_PID) and the random part of a
    temporary folder's name (TEMPORARY_NAME). Everything else (score, status, maxima, every row's
    name, score, status and output, parts, diagnoses, notes, holds, the printed output, the isolation
    level, the rest of `graded_with`) is kept. Applying it twice changes nothing, so `compare`
    applies it again to digests recorded before a rule was added."""
    data = json.loads(json.dumps(results))  # a deep copy
    data.pop("execution_time", None)
    graded_with = data.get("extra_data", {}).get("graded_with")
    if isinstance(graded_with, dict):
        graded_with.pop("grader", None)
    return _texts(data, [(checkout_path(checkout), CHECKOUT_MARK), (PROC_PID, _proc_ids),
                         (TEMPORARY_NAME, r"\1<random>")])


def _texts(value, rules):
    if isinstance(value, str):
        for pattern, replacement in rules:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, list):
        return [_texts(v, rules) for v in value]
    if isinstance(value, dict):
        return {k: _texts(v, rules) for k, v in value.items()}
    return value


# --- recording ---------------------------------------------------------------------------------

def python_env(checkout: Path) -> dict:
    """The checkout's own code first on the path (its package, not this tree's)."""
    return os.environ | {"PYTHONPATH": str(checkout)}


def grade_fresh(checkout: Path, folder: Path, group: Group, out: Path, jobs: int) -> None:
    """One `python -m autograder grade FILE --results R` per file, `jobs` at a time."""
    pending = [folder / name for name, _ in group.files.values()]
    running = []
    while pending or running:
        while pending and len(running) < jobs:
            path = pending.pop(0)
            target = out / f"{path.stem}.json"
            command = [sys.executable, "-m", "autograder", "grade", str(path), "--results", str(target),
                       *group.options, "--hide", str(folder)]
            running.append(subprocess.Popen(command, cwd=checkout, env=python_env(checkout),
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.2)
        running = [p for p in running if p.poll() is None]


def grade_batch(checkout: Path, folder: Path, group: Group, out: Path, jobs: int) -> None:
    command = [sys.executable, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out),
               "--jobs", str(jobs), *group.options]
    done = subprocess.run(command, cwd=checkout, env=python_env(checkout), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the batch failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def record(checkout: Path, route: str, corpora, jobs: int | None = None, groups_of=None) -> dict:
    """The digest of `checkout`'s grades of `corpora` by `route`. `groups_of` (corpus -> groups) is
    there for tests that grade a few files only."""
    checkout = checkout.resolve()
    jobs = jobs or (2 if route == "batch" else 1)
    grade = {"grade": grade_fresh, "batch": grade_batch}[route]
    digest = {"checkout": str(checkout), "commit": commit_of(checkout), "route": route, "jobs": jobs,
              "corpora": list(corpora), "seconds": {}, "files": {}}
    try:
        for corpus in corpora:
            groups = (groups_of or CORPORA)[corpus]()
            started = time.monotonic()
            for group in groups:
                if corpus == "adversarial":
                    place_other_checkout()
                with tempfile.TemporaryDirectory(prefix="mhsa-same-grades-") as scratch:
                    folder, out = Path(scratch) / "submissions", Path(scratch) / "results"
                    folder.mkdir()
                    out.mkdir()
                    for name, content in group.files.values():
                        (folder / name).write_bytes(content)
                    grade(checkout, folder, group, out, jobs)
                    if corpus == "adversarial" and not OTHER_CHECKOUT.exists():
                        print(f"warning: {OTHER_CHECKOUT} vanished during the record (another record, or "
                              "tests/test_adversarial.py, removed it): the other_checkout grades are not comparable",
                              file=sys.stderr)
                    for key, (name, content) in group.files.items():
                        digest["files"][key] = entry(out / f"{Path(name).stem}.json", content, group.options,
                                                     checkout)
            digest["seconds"][corpus] = round(time.monotonic() - started, 1)
            print(f"{corpus}: {sum(len(g.files) for g in groups)} files in {digest['seconds'][corpus]:.0f} s",
                  file=sys.stderr)
    finally:
        if "adversarial" in corpora:
            shutil.rmtree(OTHER_CHECKOUT, ignore_errors=True)
    return digest


def place_other_checkout() -> None:
    """The copy of the reference that tests/test_adversarial.py puts outside the repository, so that
    the other_checkout case meets what it was written for. Placed again before each group: a
    concurrent record or test removes it when it ends."""
    OTHER_CHECKOUT.joinpath("reference").mkdir(parents=True, exist_ok=True)
    (OTHER_CHECKOUT / "reference" / "mhsa.py").write_text((REPO / "reference" / "mhsa.py").read_text())
    OTHER_CHECKOUT.chmod(0o755)


def entry(results_file: Path, source: bytes, options: tuple, checkout: Path) -> dict:
    try:
        results = normalize(json.loads(results_file.read_text()), checkout)
    except (OSError, ValueError) as err:  # no grade at all: a finding in itself, kept in the digest
        results = {"missing": f"no results file: {type(err).__name__}"}
    return {"source_sha256": hashlib.sha256(source).hexdigest(), "options": list(options), "results": results}


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout,
                           capture_output=True, text=True).stdout.strip()
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


# --- comparing ---------------------------------------------------------------------------------

def differences(a, b, where: str = "") -> list:
    """Readable lines, one per differing field. Rows (results.json's `tests`) are paired by name."""
    if isinstance(a, dict) and isinstance(b, dict):
        lines = []
        for key in [*a, *(k for k in b if k not in a)]:
            here = f"{where}.{key}" if where else key
            if key not in b:
                lines.append(f"{here}: only in A")
            elif key not in a:
                lines.append(f"{here}: only in B")
            else:
                lines += differences(a[key], b[key], here)
        return lines
    if isinstance(a, list) and isinstance(b, list) and where.endswith("tests"):
        return _row_differences(a, b, where)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b)) for line in differences(x, y, f"{where}[{i}]")]
    if a == b:
        return []
    if isinstance(a, str) and isinstance(b, str) and ("\n" in a or "\n" in b):
        diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "A", "B", lineterm="", n=1)
        return [f"{where}:\n      " + "\n      ".join(list(diff)[2:40])]
    return [f"{where}: {_short(a)} -> {_short(b)}"]


def _row_differences(a: list, b: list, where: str) -> list:
    named_a, named_b = _by_name(a), _by_name(b)
    lines = differences(named_a, named_b, where)
    if not lines and list(named_a) != list(named_b):
        lines.append(f"{where}: the same rows in another order")
    return lines


def _by_name(rows: list) -> dict:
    named = {}
    for row in rows:
        name = str(row.get("name")) if isinstance(row, dict) else repr(row)
        named[name if name not in named else f"{name} #{sum(n.startswith(name) for n in named) + 1}"] = row
    return named


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 200 else text[:200] + "..."


# Texts of three adversarial cases that differ between two grades of the same file by the same route
# and grader (measured: docs/benchmarks/same-grades.md), for a race inside the grader, not a decision
# of it. Only the field named here may differ, and it is still printed; scores, statuses and every
# other text must be identical. Cases at both levels ("@process" too).
RACES = {
    "adversarial/large_output": (re.compile(r"extra_data\.printed_output:"),
                                 "the worker's BrokenPipeError traceback, written once the grader hung up, races the "
                                 "reaper's kill: the printed output holds all, part or none of it"),
    "adversarial/malformed_reply": (re.compile(r"extra_data\.printed_output:"),
                                    "the worker's BrokenPipeError traceback races the reaper's kill (as large_output)"),
    "adversarial/memory_bomb_forward": (re.compile(r"tests\..*\.output:"),
                                        "1 GiB written at a time up to the rubric's 6 GiB against a 6 s call limit: "
                                        "which limit stops the first call follows the machine's load; the messages "
                                        "say which, the scores are the same"),
}


def raced(key: str, lines: list) -> str:
    """The race that explains every one of `lines` for this file, or "" (a real difference)."""
    field, why = RACES.get(key.split("@")[0], (None, ""))
    return why if field is not None and all(field.match(line) for line in lines) else ""


def compare(a: dict, b: dict, out=sys.stdout) -> int:
    """Prints a per-file report and counts; 0 when both digests hold the same files with identical
    grades (a known race's text aside: RACES). Only the corpora both digests recorded are compared
    (a record of --corpus nbgrader against a whole one); a file missing from one of them counts."""
    corpora = [c for c in a["corpora"] if c in b["corpora"]]
    left_out = sorted(set(a["corpora"]) ^ set(b["corpora"]))
    files_a, files_b = ({k: v for k, v in d["files"].items() if k.split("/")[0] in corpora} for d in (a, b))
    counts = {"identical": 0, "different": 0, "raced text only": 0, "input changed": 0, "only in A": 0,
              "only in B": 0}
    for key in sorted(set(files_a) | set(files_b)):
        if key not in files_b or key not in files_a:
            counts["only in A" if key not in files_b else "only in B"] += 1
            print(f"{key}: {'only in A' if key not in files_b else 'only in B'}", file=out)
            continue
        x, y = files_a[key], files_b[key]
        if (x["source_sha256"], x["options"]) != (y["source_sha256"], y["options"]):
            counts["input changed"] += 1
            print(f"{key}: not comparable: the file or its options differ ({x['options']} / {y['options']})", file=out)
            continue
        lines = differences(normalize(x["results"], a["checkout"]), normalize(y["results"], b["checkout"]))
        why = raced(key, lines) if lines else ""
        counts["identical" if not lines else "raced text only" if why else "different"] += 1
        if lines:
            print(f"{key}:" + (f" (a known race: {why})" if why else ""), *(f"  {line}" for line in lines),
                  sep="\n", file=out)
    print(f"A: {a.get('route')} route, {a.get('commit')}; B: {b.get('route')} route, {b.get('commit')}", file=out)
    print(f"corpora compared: {', '.join(corpora) or 'none'}" +
          (f"; recorded in one digest only: {', '.join(left_out)}" if left_out else ""), file=out)
    print(", ".join(f"{n} {what}" for what, n in counts.items()), file=out)
    same_files = counts["identical"] + counts["raced text only"] == len(set(files_a) | set(files_b))
    return 0 if corpora and same_files else 1


def save(digest: dict, path: Path) -> None:
    """One file per route and commit; gzip where the name ends in .gz (a digest is about 10 MB of
    JSON, 0.7 MB compressed: every test row's message of about 170 grades)."""
    text = json.dumps(digest, indent=1, ensure_ascii=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode(), mtime=0) if path.suffix == ".gz" else text.encode())


def load(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="grade the corpora with a checkout and write the digest")
    rec.add_argument("--checkout", type=Path, default=REPO, help="a worktree of this repository (default: this one)")
    rec.add_argument("--route", choices=ROUTES, required=True)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--corpus", default=",".join(DEFAULT_CORPORA),
                     help=f"comma-separated, from {', '.join(CORPORA)} (default: {','.join(DEFAULT_CORPORA)})")
    rec.add_argument("--jobs", type=int, help="grades at once (default: 2 for batch, 1 for grade)")
    cmp_ = commands.add_parser("compare", help="exit 0 when two digests hold identical grades")
    cmp_.add_argument("a", type=Path)
    cmp_.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compare":
        return compare(load(args.a), load(args.b))
    corpora = [c for c in args.corpus.split(",") if c]
    unknown = sorted(set(corpora) - set(CORPORA))
    if unknown:
        parser.error(f"unknown corpus {', '.join(unknown)}; corpora are {', '.join(CORPORA)}")
    digest = record(args.checkout, args.route, corpora, args.jobs)
    save(digest, args.out)
    print(f"{len(digest['files'])} grades written to {args.out}; seconds per corpus: {digest['seconds']}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
