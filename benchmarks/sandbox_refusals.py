"""Refusals by the sandbox under the newest torch: does an upgrade turn honest code into refused calls?

    python benchmarks/sandbox_refusals.py [--torch VERSION] [--no-baseline] [--no-strace] [--keep DIR]
                                          [--out docs/benchmarks/sandbox_refusals.md]
    python benchmarks/sandbox_refusals.py --keep DIR --report-only [--out ...]   # report a kept run again

1. Finds the newest torch the package registry serves (`pip index versions torch`, on PyTorch's CPU
   index first when it answers, else on the configured index: PyPI), or takes --torch.
2. Creates a temporary virtual environment with that torch and what grading needs (pyproject.toml's
   core dependencies and matplotlib, which honest submissions import, at requirements.txt's pins;
   torch at the version found, whatever a pip configuration caps it to).
3. Grades the honest corpora as one batch at the process level (`grade FOLDER --batch --isolation
   process --suite all`): corpus/honest, corpus/honest_outside, corpus/valid (full marks on every
   code part expected), and examples/submissions (the reference's copy full, the stubs nothing, the
   missing scale part of the points).
4. With strace (unless --no-strace), the batch runs under `strace -f`, which sees every call the
   worker's filter refused (errno 3000 + its number, confine.REFUSED_BASE), the ones the code
   swallowed too; the results say which refusals reached a student's message ("the sandbox refused
   ...") or the printed output ("Unknown error 3NNN").
5. The same batch with this interpreter's torch (the pinned one), unless --no-baseline, so that
   what the upgrade changed stands beside what was there before.

Prints a Markdown report, and writes it to --out. About 15 minutes on a 2-core machine: some 3 to
install torch (4 GB with its CUDA libraries, from PyPI), some 6 for each batch under strace (half
that without).
"""
import argparse
import collections
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.core import rubric as rubric_file  # noqa: E402
from autograder.isolation.guest import confine  # noqa: E402

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PINNED = REPO / "requirements.txt"
# Each corpus, what every file of it must get on the code parts, and the prefix its files get in the batch.
CORPORA = (("honest", REPO / "corpus" / "honest", "full"),
           ("outside", REPO / "corpus" / "honest_outside", "full"),
           ("valid", REPO / "corpus" / "valid", "full"))
EXAMPLES = {"reference_copy.py": "full", "stubs.py": "none", "buggy_no_scale.py": "partial"}
# strace's line for a failed call: "PID  name(args) = -1 (errno 3259)" (strace 6) or
# "= -1 E??? (Unknown error 3259)" (older).
STRACE_FAILED = re.compile(r"^(?:\[pid\s+)?\d*\]?\s*(\w+)\(.*\)\s+=\s+-1\s+(?:\S+\s+)?"
                           r"\((?:errno|Unknown error) (\d+)\)")
NAMED = re.compile(r"the sandbox refused the system call (\d+)(?: \((\w+)\))?")
PATH_REFUSED = re.compile(r"the sandbox refused access to (\S+?)\)")
UNKNOWN_ERROR = re.compile(r"Unknown error (3\d\d\d)\b")


def build_corpus(folder: Path) -> dict:
    """The honest corpora and the examples in `folder`, each file under a name saying where it came
    from; what each must get (expectations)."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = [(f"{prefix}-{path.name}", path) for prefix, source, _ in CORPORA
               for path in sorted(source.iterdir()) if path.suffix in (".py", ".ipynb") and path.name != "build.py"]
    sources += [(f"example-{name}", REPO / "examples" / "submissions" / name) for name in EXAMPLES]
    if len({Path(name).stem for name, _ in sources}) != len(sources):
        raise ValueError("two submissions of the corpora have the same name")
    for name, path in sources:
        shutil.copyfile(path, folder / name)
    return expectations(folder)


def expectations(folder: Path) -> dict:
    """{submission name, as the batch names it: "full" | "partial" | "none"}: what the code parts of
    each file of `folder` (built by build_corpus) must get."""
    grades = {prefix: grade for prefix, _, grade in CORPORA}
    return {path.stem: EXAMPLES[path.name.removeprefix("example-")] if path.name.startswith("example-")
            else grades[path.name.split("-")[0]] for path in sorted(folder.iterdir())}


def refusals_in(lines, names: dict) -> collections.Counter:
    """{"name (N)": count} of the calls the filter refused in strace's `lines` (errno 3000 + N)."""
    seen = collections.Counter()
    for line in lines:
        found = STRACE_FAILED.match(line)
        if found is None:
            continue
        number = int(found.group(2)) - confine.REFUSED_BASE
        if 0 <= number <= confine.MAX_ERRNO - confine.REFUSED_BASE:
            seen[f"{names.get(number, found.group(1))} ({number})"] += 1
    return seen


def newest_torch(python: str) -> tuple:
    """(the newest torch version the registry serves, the index that serves it: None for the configured
    one). PyTorch's CPU index only where it answers: pip would otherwise answer from the configured
    extra indexes and take their newest for the CPU index's."""
    index = CPU_INDEX if reachable(f"{CPU_INDEX}/torch/") else None
    extra = ["--index-url", index] if index else []
    done = subprocess.run([python, "-m", "pip", "index", "versions", "torch", *extra],
                          capture_output=True, text=True, timeout=300)
    found = re.search(r"^torch \(([^)]+)\)", done.stdout, re.M)
    if found is None:
        raise SystemExit("no package index answered for torch:\n" + done.stdout[-2000:] + done.stderr[-2000:])
    return found.group(1), index


def reachable(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except OSError:
        return False


def make_env(env: Path, torch_version: str, index) -> str:
    """A virtual environment with torch `torch_version` and the grader's core requirements; its Python."""
    print(f"Creating {env} with torch {torch_version}", flush=True)
    venv.EnvBuilder(with_pip=True).create(env)
    python = str(env / "bin" / "python")
    spec = importlib_setup_venv()
    requirements = [r for r in spec.declared() if not r.replace(" ", "").startswith("torch")] + ["matplotlib"]
    constraints = env / "constraints.txt"  # requirements.txt's pins, torch's left out
    constraints.write_text("".join(line + "\n" for line in PINNED.read_text().splitlines()
                                   if not re.match(r"\s*torch\s*[=<>!~]", line)))
    # PIP_CONSTRAINT replaces a configured constraint file, which may cap torch below the newest.
    pip_env = os.environ | {"PIP_CONSTRAINT": str(constraints)}
    extra = ["--index-url", index, "--extra-index-url", "https://pypi.org/simple"] if index else []
    started = time.monotonic()
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *extra,
                    f"torch=={torch_version}", *requirements], check=True, env=pip_env)
    print(f"  installed in {time.monotonic() - started:.0f} s", flush=True)
    (env / "installed.json").write_text(json.dumps({"seconds": round(time.monotonic() - started),
                                                    "index": index or "the configured index"}))
    return python


def importlib_setup_venv():
    import importlib.util

    spec = importlib.util.spec_from_file_location("setup_venv", REPO / "setup_venv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grade_batch(python: str, folder: Path, out: Path, use_strace: bool) -> dict:
    """Grades `folder` as one batch at the process level with `python`; what it saw."""
    command = [python, "-m", "autograder", "grade", str(folder), "--batch", "--out", str(out), "--jobs", "2",
               "--suite", "all", "--isolation", "process", "--force"]
    trace = out.parent / f"{out.name}.strace"
    if use_strace:
        command = ["strace", "-f", "-qq", "-e", "status=failed", "-o", str(trace), *command]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800,
                          env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"})
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the batch failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    seen = collections.Counter()
    if use_strace:
        with open(trace, errors="replace") as lines:
            seen = refusals_in(lines, confine.syscall_names())
    summary = {"torch": version, "seconds": elapsed, "traced": use_strace, "kernel": dict(seen)}
    (out.parent / f"{out.name}.json").write_text(json.dumps(summary, indent=1))
    return load_batch(out)


def load_batch(out: Path) -> dict:
    """What grade_batch saw for the batch graded into `out`, read back."""
    summary = json.loads((out.parent / f"{out.name}.json").read_text())
    return summary | {"kernel": collections.Counter(summary["kernel"])} | read_results(out)


def read_results(out: Path) -> dict:
    """Per submission: whether its code parts got full marks, none, or some, and its total; the
    refusals its results name (test messages) and its printed output shows (errnos)."""
    code_parts = [name for name, part in rubric_file.load().parts.items() if part.functions and name != "timing"]
    names = confine.syscall_names()
    found = {"grades": {}, "scores": {}, "messages": collections.Counter(), "printed": collections.Counter(),
             "statuses": collections.Counter()}
    for row in csv.DictReader((out / "grades.csv").open()):
        name = row["submission"]
        data = json.loads((out / f"{name}.json").read_text())
        parts = data["extra_data"]["parts"]
        earned, most = (sum(parts[p][key] for p in code_parts) for key in ("score", "max_score"))
        found["grades"][name] = "full" if earned == most else "none" if earned == 0 else "partial"
        found["scores"][name] = data["score"]
        found["statuses"][data["extra_data"]["status"]] += 1
        tests = json.dumps(data["tests"])
        for number, call in set(NAMED.findall(tests)):
            found["messages"][f"{call or names.get(int(number), '?')} ({number})"] += 1
        for path in set(PATH_REFUSED.findall(tests)):
            found["messages"][f"access to {path}"] += 1
        for errno in set(UNKNOWN_ERROR.findall(data["extra_data"].get("printed_output", ""))):
            number = int(errno) - confine.REFUSED_BASE
            found["printed"][f"{names.get(number, '?')} ({number})"] += 1
    return found


def counted(counter) -> str:
    return ", ".join(f"{key}: {n}" for key, n in counter.most_common()) or "none"


HEADER = """# Refusals by the sandbox under the newest torch

Measured by `python benchmarks/sandbox_refusals.py` (docs/isolation.md, "Refusals, named"): the
honest corpora graded as one batch at the process level (`--suite all`, `--jobs 2`), under
`strace -f`, which sees every call the worker's seccomp filter refused (errno 3000 + its number),
also those the code swallowed: a refusal the kernel counted that no result names was caught by
the code that made it, which went on without the call. Rerun the script to refresh this page.
"""
COLUMNS = ("torch", "graded", "as expected", "full marks (of those expected)",
           "calls refused, seen by the kernel (count)", "refusals named in results (submissions)",
           "in printed output (submissions)", "same total as pinned", "batch time")


def report(runs: list, expected: dict, setup: dict) -> str:
    full = [name for name, grade in expected.items() if grade == "full"]
    corpora = collections.Counter(name.split("-")[0] for name in expected)
    lines = [HEADER,
             f"Machine: {platform.machine()}, Linux {platform.release()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}; {time.strftime('%Y-%m-%d')}. The newest torch was installed from "
             f"{setup.get('index', '?')} in {setup.get('installed_s', '?')} s; the whole run took "
             f"{setup.get('total_s', '?')} s.", "",
             f"Submissions: {len(expected)} ({', '.join(f'{n} {corpus}' for corpus, n in corpora.items())}); "
             f"expected full marks on every code part: {len(full)}.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    pinned = next((run["scores"] for run in runs if run.get("pinned")), None)
    wrong = []
    for run in runs:
        grades = run["grades"]
        both = [n for n in expected if n in run["scores"] and n in (pinned or {})]
        same = f"{sum(run['scores'][n] == pinned[n] for n in both)} of {len(both)}" if pinned else "-"
        cells = (run["torch"] + (" (pinned)" if run.get("pinned") else ""),
                 f"{len(grades)} of {len(expected)} ({counted(run['statuses'])})",
                 sum(grades.get(name) == grade for name, grade in expected.items()),
                 f"{sum(grades.get(name) == 'full' for name in full)} of {len(full)}",
                 counted(run["kernel"]) if run["traced"] else "not traced",
                 counted(run["messages"]), counted(run["printed"]), same, f"{run['seconds']:.0f} s")
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
        unexpected = {name: grades.get(name) for name, grade in expected.items() if grades.get(name) != grade}
        if unexpected:
            wrong.append(f"torch {run['torch']}: {unexpected}")
    lines += ["", f"Grades not as expected: {'; '.join(wrong) or 'none'}."]
    return "\n".join(lines).rstrip("\n") + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", help="the torch version to install (default: the newest the registry serves)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip the batch with this interpreter's torch")
    parser.add_argument("--no-strace", dest="strace", action="store_false", help="grade without strace")
    parser.add_argument("--keep", type=Path, help="build the environment and the batches here and keep them")
    parser.add_argument("--report-only", action="store_true",
                        help="install and grade nothing: report the batches kept in --keep DIR")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    if args.report_only and args.keep is None:
        parser.error("--report-only reads the batches of --keep DIR")
    if args.strace and shutil.which("strace") is None:
        print("strace is not installed: refusals are counted from the results only", flush=True)
        args.strace = False
    work = args.keep or Path(tempfile.mkdtemp(prefix="sandbox-refusals-"))
    work.mkdir(parents=True, exist_ok=True)
    pin = re.search(r"^torch==(\S+)", PINNED.read_text(), re.M).group(1)
    started = time.monotonic()
    try:
        expected = expectations(work / "submissions") if args.report_only else build_corpus(work / "submissions")
        if args.report_only:
            runs = [load_batch(work / name) for name in ("grades-newest", "grades-pinned")
                    if (work / f"{name}.json").exists()]
        else:
            version, index = (args.torch, None) if args.torch else newest_torch(sys.executable)
            print(f"The newest torch served: {version} ({index or 'the configured index'})", flush=True)
            env = work / "env"
            python = str(env / "bin" / "python") if (env / "bin" / "python").exists() else make_env(env, version, index)
            runs = [grade_batch(python, work / "submissions", work / "grades-newest", args.strace)]
            if runs[0]["torch"].split("+")[0] == pin:
                print("The newest torch is the pinned one: no second batch", flush=True)
            elif args.baseline:
                runs.append(grade_batch(sys.executable, work / "submissions", work / "grades-pinned", args.strace))
        for run in runs:
            run["pinned"] = run["torch"].split("+")[0] == pin
        setup_file = work / "run.json"
        if not args.report_only:
            installed = json.loads((env / "installed.json").read_text()) if (env / "installed.json").exists() else {}
            setup_file.write_text(json.dumps({"total_s": round(time.monotonic() - started),
                                              "installed_s": installed.get("seconds", "?"),
                                              "index": installed.get("index", "?")}))
        setup = json.loads(setup_file.read_text()) if setup_file.exists() else {}
        text = report(runs, expected, setup)
        print(text)
        if args.out:
            args.out.write_text(text)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
