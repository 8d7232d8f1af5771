"""Gradescope: the autograder bundle, what runs inside it for each submission, and its local rehearsal (--try).

The bundle is made by `python -m autograder gradescope OUT.zip`; for each submission, `run_autograder`
calls `python -m autograder.runners.gradescope`.

Gradescope unzips the bundle into /autograder/source and runs setup.sh once when it builds the image;
then, for each submission, run_autograder with the student's files in /autograder/submission, and it
reads /autograder/results/results.json. The environment variable AUTOGRADER_ROOT replaces /autograder,
so that tests and `gradescope --try` (rehearse) lay the same folders out anywhere.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import datetime
from functools import partial
from pathlib import Path

from autograder.core import paths
from autograder.core import rubric as rubric_file

ROOT_VAR = "AUTOGRADER_ROOT"
PYTHON_VAR = "AUTOGRADER_PYTHON"  # run_autograder's interpreter, in place of the venv setup.sh makes
METADATA = "submission_metadata.json"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image. AUTOGRADER_ROOT (default
# /autograder) is the folder Gradescope lays out; PIP_INDEX_URL and TORCH_INDEX_URL replace PyPI and
# PyTorch's CPU wheel index (a mirror, or an index reached through a proxy).
set -euo pipefail
cd "$(dirname "$0")"
ROOT="${AUTOGRADER_ROOT:-/autograder}"
VENV="$ROOT/venv"
PYPI_INDEX="${PIP_INDEX_URL:-https://pypi.org/simple}"
TORCH_INDEX="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
# The image's own Python grades (3.10 on Ubuntu 22.04 images); requirements.txt adds what 3.10 lacks.
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup.sh: grading needs Python 3.10 or newer; this image has $(python3 --version 2>&1)" >&2
    exit 1
fi
# Both indexes must answer before anything is installed: pip retries an unreachable one for minutes
# per package before it gives up. An HTTP error is an answer (pip then says what the index said).
python3 - "$PYPI_INDEX" pip PIP_INDEX_URL "$TORCH_INDEX" torch TORCH_INDEX_URL <<'PROBE'
import sys, urllib.error, urllib.request
probes = sys.argv[1:]
for index, project, variable in zip(probes[0::3], probes[1::3], probes[2::3]):
    try:
        urllib.request.urlopen(index.rstrip("/") + "/" + project + "/", timeout=10).close()
    except urllib.error.HTTPError:
        continue
    except (OSError, ValueError) as err:
        sys.exit(f"setup.sh: cannot reach {index} ({getattr(err, 'reason', err)}): set {variable} to an index "
                 "that is reachable, or run setup.sh where this one is")
PROBE
if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    # The sandbox isolation level; without it (or without user namespaces) grading falls back to
    # the process level and every results.json says which level was used.
    apt-get install -y -qq bubblewrap || echo "bubblewrap not installed: process-level isolation"
    # Debian and Ubuntu ship the venv module's pip installer apart from Python itself.
    python3 -c 'import ensurepip' 2>/dev/null || apt-get install -y -qq python3-venv
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# Gradescope's containers have no GPU: PyTorch's CPU-only wheel (about 0.2 GB) instead of the
# default Linux build, which pulls several GB of CUDA libraries. The pinned version matches its
# "+cpu" build; the second install then finds torch already there.
"$VENV/bin/python" -m pip install -q --index-url "$TORCH_INDEX" "$(grep -E '^torch==' requirements.txt)"
"$VENV/bin/python" -m pip install -q -r requirements.txt
# Without bubblewrap the worker drops root for `nobody`; file permissions then keep the reference,
# the hidden tests and the rubric from it.
id nobody >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin nobody
chmod -R go-rwx reference tests_hidden rubric.toml
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT (default /autograder) and
# AUTOGRADER_PYTHON (default: the venv setup.sh made) let a test run it on a folder laid out the same way.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
cd "$ROOT/source"
exec "$PYTHON" -m autograder.runners.gradescope "$ROOT"
"""


def core_packages() -> set:
    """What grading needs: pyproject.toml's core dependencies (not an extra's), by name."""
    from autograder.core import toml

    return {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
            for requirement in toml.loads(paths.PYPROJECT.read_text())["project"]["dependencies"]}


def requirements_text() -> str:
    """requirements.txt's pins of what grading needs (core_packages: not nbgrader, not matplotlib)."""
    packages = core_packages()
    lines = paths.REQUIREMENTS.read_text().splitlines()
    pinned = [line.strip() for line in lines if line.split("==")[0].strip().lower() in packages]
    missing = packages - {line.split("==")[0].lower() for line in pinned}
    if missing:
        raise RuntimeError(f"requirements.txt pins no version of {', '.join(sorted(missing))}")
    return "\n".join(pinned) + "\n"


def build_bundle(out: Path) -> Path:
    """Write the autograder zip; its root becomes /autograder/source on Gradescope. It holds what the
    grader needs at grading time (paths.GRADER_FILES) and the scripts."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        _add_text(bundle, "setup.sh", SETUP_SH, executable=True)
        _add_text(bundle, "run_autograder", RUN_AUTOGRADER, executable=True)
        _add_text(bundle, "requirements.txt", requirements_text())
        for path in paths.grader_files():
            bundle.write(path, path.relative_to(paths.REPO).as_posix())
    return out


def _add_text(bundle, name, text, executable=False):
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(info, text)


def find_submission(folder: Path) -> Path:
    """What to grade among the uploaded files: the folder of the shallowest mhsa.py (so that the
    knowledge.py beside it is graded too, and a notebook beside it is weighed by autograder/intake/route.py,
    whose note in the results says which file was graded and why), else the shallowest notebook, else
    the upload itself (and the grader says what is missing). Links are never followed: they could
    lead to the reference."""
    for pattern in ("mhsa.py", "*.ipynb"):
        found = sorted((p for p in folder.rglob(pattern)
                        if ".ipynb_checkpoints" not in p.parts and not p.is_symlink() and p.is_file()),
                       key=lambda p: (len(p.parts), str(p)))
        if found:
            return found[0].parent if pattern == "mhsa.py" else found[0]
    return folder


def read_metadata(metadata: Path) -> dict:
    """Gradescope's submission_metadata.json, or {} when it is missing or not a JSON object."""
    try:
        data = json.loads(metadata.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def days_late(data: dict) -> float:
    """Days between the assignment's due date and this submission, from Gradescope's metadata (0 when
    on time, or when a date is missing)."""
    try:
        submitted = datetime.fromisoformat(data["created_at"])
        due = datetime.fromisoformat(data["assignment"]["due_date"])
    except (ValueError, KeyError, TypeError):
        return 0.0
    return max(0.0, (submitted - due).total_seconds() / 86400)


def deadline(data: dict) -> tuple:
    """(ISO text, whose) of the last moment Gradescope accepts a submission: the assignment's late due
    date, else its due date, moved later by a submitter's own extension where the metadata lists one;
    (None, "") where it gives none (the rubric's `due` decides then)."""
    assignment = data.get("assignment") if isinstance(data.get("assignment"), dict) else {}
    dates = [(assignment.get("late_due_date"), "Gradescope's late due date"),
             (assignment.get("due_date"), "Gradescope's due date")]
    users = data.get("users") if isinstance(data.get("users"), list) else []
    for user in users:  # an extension: Gradescope lists the submitter's own dates under their name
        own = user.get("assignment") if isinstance(user, dict) and isinstance(user.get("assignment"), dict) else {}
        dates += [(own.get("late_due_date"), "your extended late due date"), (own.get("due_date"), "your extended due date")]
    known = []
    for text, whose in dates:
        try:
            moment = datetime.fromisoformat(text)
        except (TypeError, ValueError):
            continue
        known.append((moment if moment.tzinfo else moment.astimezone(), text, whose))
    if not known:
        return None, ""
    _, text, whose = max(known, key=lambda k: k[0])
    return text, whose


def grade_root(root: Path, rubric) -> str:
    """Grade root/submission into root/results/results.json, in a child process within the rubric's
    whole-submission limit, exactly as a batch grades each submission; never raises. Returns the
    status ("graded", "error", "timeout" or "crashed")."""
    from autograder.isolation.host.levels import resolve
    from autograder.pipeline.grade_file import GradeOptions
    from autograder.runners.slot import Submission, grade_in_child

    target = root / "results" / "results.json"
    found = find_submission(root / "submission")
    metadata = read_metadata(root / "submission_metadata.json")
    due, due_from = deadline(metadata)
    options = GradeOptions(days_late=days_late(metadata), due=due, due_from=due_from,
                           hide=(root / "results", root / "submission"))
    return grade_in_child(Submission(found.name, found), target, options, rubric, resolve(options.isolation).level,
                          partial(options.max_units, rubric))


# ------------------------------------------------------------------------------------------------
# A rehearsal (`gradescope --try`): the bundle run here as Gradescope runs it, on a fake /autograder.
# ------------------------------------------------------------------------------------------------

class RehearsalError(Exception):
    """Why a rehearsal could not run, in one line for the instructor."""


# What Gradescope shows a student of each row, by the row's visibility.
SHOWN_WHEN = {"visible": "shown now", "after_due_date": "shown after the due date",
              "after_published": "shown once grades are published", "hidden": "never shown to the student"}


def uploads(files) -> dict:
    """The upload made of `files` (paths: a file, or a folder uploaded with its tree): the name each
    gets in submission/ -> the path. RehearsalError when one is missing or two share a name."""
    upload = {}
    for file in map(Path, files):
        if not file.exists():
            raise RehearsalError(f"gradescope --try: no such file or folder: {file}")
        name = Path(os.path.abspath(file)).name  # "." named; a link keeps its own name, as a browser uploads it
        if name in upload:
            raise RehearsalError(f"gradescope --try: two files named {name} ({upload[name]} and {file}): "
                                 "an upload holds one of each name")
        upload[name] = file
    return upload


def lay_out(bundle: Path, root: Path, upload: dict, metadata: dict | None = None) -> Path:
    """Gradescope's folders under `root`, as it lays them out for one submission: source/ (the bundle
    unzipped, its scripts executable, which zipfile does not restore), submission/ (`upload`: a name
    -> the file or folder to copy there; links are copied as links), results/, and
    submission_metadata.json unless `metadata` is None. Returns root."""
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
        for info in z.infolist():
            if info.external_attr >> 16 & stat.S_IXUSR:
                os.chmod(root / "source" / info.filename, 0o755)
    (root / "submission").mkdir(parents=True, exist_ok=True)
    for name, source in upload.items():
        target = root / "submission" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(source).is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copyfile(source, target)
    (root / "results").mkdir(exist_ok=True)
    if metadata is not None:
        write_metadata(root / METADATA, metadata)
    return root


def write_metadata(path: Path, metadata: dict) -> None:
    """submission_metadata.json, laid out as Gradescope writes it (and kept beside a rehearsal's results)."""
    path.write_text(json.dumps(metadata, indent=2) + "\n")


def autograder_environment(root: Path) -> dict:
    """The environment that runs root/source/run_autograder here: this interpreter grades, so that no
    venv needs building."""
    return os.environ | {ROOT_VAR: str(root), PYTHON_VAR: sys.executable}


def rehearsal_metadata(due: str | None) -> dict:
    """submission_metadata.json for an upload made now, in Gradescope's form: `due` (ISO 8601; a bare
    date is the end of that day, a time without offset this machine's time zone, as for rubric.toml's
    `due`) as the assignment's due date, without a late due date; with no `due`, no dates at all, so
    that rubric.toml's `[parts.knowledge] due` decides, as it does on Gradescope for an assignment
    without dates."""
    from autograder.intake import knowledge

    due_date = knowledge.deadline({"due": knowledge.parse_moment(due)}).isoformat() if due else None
    return {"id": 0, "created_at": datetime.now().astimezone().isoformat(), "submission_method": "upload",
            "assignment": {"due_date": due_date, "late_due_date": None, "title": "gradescope --try"},
            "users": [], "previous_submissions": []}


def rehearse(files, keep: Path, due: str | None = None, bundle: Path | None = None):
    """Grade `files` as one submission the way Gradescope would: the bundle (`bundle`, else one built
    now) unzipped into a temporary fake /autograder with submission_metadata.json from `due`, and its
    run_autograder run there. results.json and the metadata are kept in `keep`. Returns the Results;
    RehearsalError when it could not run."""
    from autograder.record import results

    upload = uploads(files)
    metadata = rehearsal_metadata(due)
    with tempfile.TemporaryDirectory(prefix="gradescope-try-") as scratch:
        root = Path(scratch) / "autograder"
        lay_out(bundle or build_bundle(Path(scratch) / "autograder.zip"), root, upload, metadata)
        done = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=autograder_environment(root),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        found = results.load(root / "results" / results.RESULTS_FILE)
    if found is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RehearsalError(f"gradescope --try: run_autograder wrote no results (exit status {done.returncode}): {last}")
    keep = Path(keep)
    keep.mkdir(parents=True, exist_ok=True)
    results.write(keep / results.RESULTS_FILE, found)
    write_metadata(keep / METADATA, metadata)
    return found


def student_view(found) -> str:
    """What Gradescope shows the student of these results: the score, the top-level text, and each row
    with its points, its output and when the student sees it (its visibility)."""
    maximum = f"{found.max_score:g}" if found.max_score is not None else "?"
    lines = [f"Autograder score: {found.score:g} / {maximum}", "", found.output.rstrip(), "", "Tests:"]
    for row in found.tests:
        points = f"{row.score:g} / {row.max_score:g}" if row.score is not None else "no points"
        status = f" {row.status}" if row.status else ""
        lines.append(f"  {row.name}: {points}{status} [{row.visibility}: {SHOWN_WHEN.get(row.visibility, row.visibility)}]")
        lines += [f"      {line}" for line in row.output.rstrip().splitlines()]
    return "\n".join(lines)


def main(argv=None) -> int:
    from autograder.record import results

    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else os.environ.get(ROOT_VAR, "/autograder"))
    rubric = rubric_file.load()  # the bundle's own; a broken one stops here, for every submission alike
    try:
        grade_root(root, rubric)
    except Exception as err:  # noqa: BLE001 - a results file that says so beats Gradescope's blank error page
        from autograder.pipeline.grade_file import write_failure

        message = f"The autograder itself failed on this submission ({type(err).__name__}: {err}); course staff have the details."
        write_failure(root / "results" / "results.json", "submission", "error", message, rubric, 0, "none")
    found = results.load(root / "results" / "results.json")
    print(found.output if found else "no results were written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
