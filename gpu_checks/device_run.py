"""Every CUDA check of the timing part in one call on a lent GPU machine, within 8 minutes.

    OUT=DIR sh gpu_checks/device_run.sh                  # on the GPU machine (python3, run as root, no network)
    OUT=DIR sh gpu_checks/device_run.sh --cpu-dry-run    # the same steps on the CPU, CPU-sized (rehearsal)
    PYTHON=/path/to/python ...                           # another interpreter (default python3)

Steps, each in its own process under its own time limit, so that a slow or failing step cannot eat
the others' time; a step that fails or runs out of time is recorded and the next one runs:
  versions       the GPU, its driver, python, torch, CUDA, the versions of numpy, pytest, hypothesis, triton,
                 and whether CUDA works once root is dropped for nobody (as the timing workers do)
  cuda_tests     `pytest -m cuda tests/test_gpu_checks.py` (on the dry run: the same tests on the CPU)
  grade_*        `python -m autograder grade` with the timing part on CUDA, for the reference and for the
                 loop over heads (gpu_checks/calibration/bad_loop_heads.py), each writing its results.json
  validate       gpu_checks/validate_gpu.py, last: it gets the time the steps before it left
All run at the process isolation level (the GPU machine has no bubblewrap). Everything lands in OUT,
at most 8 plain files (FILES); the log and the summary are rewritten after every step, so that a run
killed from outside keeps what it measured. `python gpu_checks/publish_device_run.py OUT` turns them into
docs/benchmarks/gpu-validation-DATE.md and .json. Standard library only: a broken torch is a finding
of the versions step, not a crash of this script. Exit status 0 when every step exited 0.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DRY_RUN_ENV = "DEVICE_RUN_CPU_DRY_RUN"
TEST_DEVICE_ENV = "GPU_CHECKS_TEST_DEVICE"  # tests/test_gpu_checks.py's CUDA tests run on this device
TOTAL_S = {"gpu": 470, "cpu-dry-run": 900}  # the whole run, under the 8 minutes a device call is planned for
# Each step's limit on the GPU: a grade's timing part on CUDA runs 8 cases with the rubric's settings;
# the loop over heads stops at its first failed case. On the CPU's dry run, 120 s each.
LIMITS_S = {"versions": 40, "cuda_tests": 60, "grade_reference": 90, "grade_bad_loop_heads": 75}
DRY_RUN_LIMIT_S = 120
VALIDATE_GRACE_S = 50  # a session validate_gpu started just before its budget ran out still finishes
LOG_BYTES_PER_STEP = 1 << 20
GRADED = {"reference": REPO / "reference" / "mhsa.py",
          "bad_loop_heads": REPO / "gpu_checks" / "calibration" / "bad_loop_heads.py"}
FILES = {"log": "device-run.log", "summary_json": "summary.json", "summary_md": "summary.md",
         "validation_md": "validation.md", "validation_json": "validation.json",
         "cuda_tests": "cuda-tests.xml", **{f"grade_{name}": f"grade-{name}.json" for name in GRADED}}
# The dry run's validation: the rubric's CPU configs, float32 only and fewer pairs (as the CI tests time them).
DRY_RUN_TIMING = ('dtypes = ["float32"]\npairs = 6\nearly_pairs = 5\nrerun_pairs = 12\nwarmup_pairs = 1\n'
                  'check_calls = 1\nsolo_calls = 3\n')
VERSIONS_PROBE = """
import importlib, json, platform
info = {"python": platform.python_version()}
try:
    import torch
    info.update(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                cuda_available=torch.cuda.is_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, capability=f"{p.major}.{p.minor}", gpu_memory_gib=round(p.total_memory / 2**30, 1),
                    device_count=torch.cuda.device_count())
except Exception as err:
    info["torch_error"] = repr(err)
try:  # the driver's version where nvidia-smi is missing
    info["driver_proc"] = open("/proc/driver/nvidia/version").readline().strip()
except OSError:
    pass
for name in ("numpy", "pytest", "hypothesis", "triton"):
    try:
        info[name] = importlib.import_module(name).__version__
    except Exception as err:
        info[name] = f"missing ({type(err).__name__})"
print(json.dumps(info))
"""
# As root, a worker drops to nobody before importing torch (autograder/isolation/guest/confine.py): whether CUDA
# still works then, without Landlock, tells a driver's permissions from the worker's confinement.
NOBODY_PROBE = """
import json, os
try:
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
    user = "nobody"
except OSError as err:
    user = f"uid {os.geteuid()} ({err.strerror})"
os.environ["HOME"] = "/tmp"
import torch
info = {"user": user, "cuda_available": torch.cuda.is_available()}
if info["cuda_available"]:
    x = torch.ones(64, 64, device="cuda")
    info["matmul_ok"] = (x @ x).sum().item() == 64 ** 3
print(json.dumps({"as_worker_user": info}))
"""
NVIDIA_SMI_QUERY = "name,driver_version,memory.total,power.limit,clocks.max.sm"


@dataclass
class Step:
    name: str
    commands: list  # argv lists, run one after another within the step's limit
    limit_s: float
    env: dict = field(default_factory=dict)
    result: dict = field(default_factory=lambda: {"status": "not run"})


def plan(dry_run: bool, work: Path, out: Path, python: str = sys.executable) -> list:
    """The steps, in order; validate's limit is set when it starts (the time left)."""
    timing_device = "cpu" if dry_run else "cuda"

    def limit(name):
        return DRY_RUN_LIMIT_S if dry_run else LIMITS_S[name]

    steps = [Step("versions", [[python, "-c", VERSIONS_PROBE], [python, "-c", NOBODY_PROBE]] + ([] if dry_run else [
        ["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv"]]), limit("versions")),
        Step("cuda_tests", [[python, "-m", "pytest", "-m", "cuda", "tests/test_gpu_checks.py", "-q", "-rs",
                             f"--junitxml={out / FILES['cuda_tests']}"]], limit("cuda_tests"),
             env={TEST_DEVICE_ENV: timing_device})]
    for name, path in GRADED.items():
        steps.append(Step(f"grade_{name}", [[python, "-m", "autograder", "grade", str(path.relative_to(REPO)),
                                             "--isolation", "process", "--timing-device", timing_device,
                                             "--results", str(out / FILES[f"grade_{name}"])]],
                          limit(f"grade_{name}")))
    validate = [python, "gpu_checks/validate_gpu.py", "--isolation", "process", "--device", timing_device,
                "--out", str(work / "validation")]
    if dry_run:
        rubric = work / "dry-run-rubric.toml"
        rubric.write_text((REPO / "rubric.toml").read_text().replace("[parts.timing.cpu]\n",
                                                                     "[parts.timing.cpu]\n" + DRY_RUN_TIMING))
        validate += ["--rubric", str(rubric), "--repeats", "3"]
    steps.append(Step("validate", [validate], 0))
    return steps


def run_step(step: Step, log: Path, env: dict) -> None:
    """Runs the step's commands in a fresh process group each, killed with everything it started when
    the step's limit is reached (a worker's reaper then ends the worker: its lifeline closes)."""
    started = time.monotonic()
    deadline = started + step.limit_s
    output = log.with_name(f"{step.name}.out")
    step.result = {"status": "ok", "limit_s": round(step.limit_s), "exit_codes": []}
    with output.open("wb") as sink:
        for argv in step.commands:
            sink.write(f"$ {' '.join(argv[:3])}{' ...' if len(argv) > 3 else ''}\n".encode())
            sink.flush()
            try:
                proc = subprocess.Popen(argv, cwd=REPO, env=env | step.env, stdin=subprocess.DEVNULL, stdout=sink,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as err:
                step.result["exit_codes"].append(None)
                step.result["status"] = f"could not start {argv[0]}: {err.strerror}"
                continue
            try:
                code = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                step.result["exit_codes"].append(None)
                step.result["status"] = f"timed out after {step.limit_s:.0f} s"
                break
            step.result["exit_codes"].append(code)
            if code != 0 and step.result["status"] == "ok":
                step.result["status"] = f"exit {code}"
    step.result["seconds"] = round(time.monotonic() - started, 1)
    append_log(log, step, output)


def append_log(log: Path, step: Step, output: Path) -> None:
    data = output.read_bytes()
    cut = len(data) - LOG_BYTES_PER_STEP
    with log.open("ab") as sink:
        sink.write(f"\n===== {step.name}: {step.result['status']}, {step.result['seconds']} s of "
                   f"{step.limit_s:.0f} s =====\n".encode())
        if cut > 0:
            sink.write(f"[first {cut} bytes left out]\n".encode())
        sink.write(data[max(cut, 0):])


def versions(output: str) -> dict:
    """The probe's JSON line and nvidia-smi's CSV (header + first GPU) from the versions step's output."""
    found = {}
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("{"):
            try:
                found.update(json.loads(line))
            except ValueError:
                pass
        elif line.startswith("name, driver_version") and i + 1 < len(lines):
            header = [h.strip().split(" [")[0] for h in line.split(",")]
            values = [v.strip() for v in lines[i + 1].split(",")]
            found["nvidia_smi"] = dict(zip(header, values))
            found["driver"] = found["nvidia_smi"].get("driver_version")
    return found


def grade_summary(path: Path) -> dict | None:
    """A results.json's status, score and timing row (tag "timing")."""
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    timing = next((t for t in results.get("tests", []) if t.get("tags") == ["timing"]), None)
    extra = results.get("extra_data", {})
    return {"status": extra.get("status"), "score": results.get("score"), "max_score": extra.get("max_score"),
            "timing": timing and {k: timing.get(k) for k in ("name", "score", "max_score", "output")}}


def test_summary(path: Path) -> dict | None:
    """Counts and every non-passing test from pytest's JUnit XML."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    counts, tests = {"passed": 0, "failed": 0, "skipped": 0}, []
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "skipped" if child.tag == "skipped" else "failed"
                message = (child.get("message") or "")[:300]
        counts[outcome] += 1
        tests.append({"name": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                      "seconds": float(case.get("time") or 0), "message": message})
    return {**counts, "tests": tests}


def collect_validation(work: Path, out: Path) -> dict | None:
    """validate_gpu's md and json (named by date) copied to OUT under fixed names."""
    made = {p.suffix: p for p in (work / "validation").glob("*-validation-*.*")}
    for suffix, key in ((".md", "validation_md"), (".json", "validation_json")):
        if suffix in made:
            shutil.copyfile(made[suffix], out / FILES[key])
    try:
        figures = json.loads((out / FILES["validation_json"]).read_text())
    except (OSError, ValueError):
        return None
    return {k: figures.get(k) for k in ("all_expectations_met", "elapsed_s", "budget_s", "isolation", "machine")}


def summary(kind: str, started: str, elapsed: float, steps: list, out: Path, work: Path) -> dict:
    by_name = {s.name: s for s in steps}
    log_text = (work / "versions.out").read_text(errors="replace") if (work / "versions.out").exists() else ""
    return {"kind": kind, "started": started, "elapsed_s": round(elapsed, 1),
            "all_steps_ok": all(s.result["status"] in ("ok", "not run") for s in steps),  # not run: not chosen
            "versions": versions(log_text),
            "steps": [{"name": s.name, **s.result} for s in steps],
            "grades": {name: grade_summary(out / FILES[f"grade_{name}"]) for name in GRADED
                       if by_name[f"grade_{name}"].result["status"] != "not run"},
            "cuda_tests": test_summary(out / FILES["cuda_tests"]),
            "validation": collect_validation(work, out),
            "files": sorted({p.name for p in out.iterdir() if p.is_file()}
                            | {FILES["summary_json"], FILES["summary_md"]})}


def markdown(s: dict, out: Path) -> str:
    v = s["versions"]
    lines = [f"# Device run ({s['kind']}), {s['started']}", "",
             f"- GPU: {v.get('gpu', 'none')} ({v.get('gpu_memory_gib', '-')} GiB, compute capability "
             f"{v.get('capability', '-')}); driver {v.get('driver') or v.get('driver_proc', '-')}",
             f"- python {v.get('python')}, torch {v.get('torch')}, CUDA {v.get('cuda')}, cuDNN {v.get('cudnn')}, "
             f"triton {v.get('triton')}, numpy {v.get('numpy')}, pytest {v.get('pytest')}, "
             f"hypothesis {v.get('hypothesis')}",
             f"- CUDA once root is dropped, as in the timing workers: {v.get('as_worker_user', '-')}",
             f"- elapsed {s['elapsed_s']} s; every step exited 0: {s['all_steps_ok']}", "",
             "| step | limit (s) | seconds | result |", "| --- | --- | --- | --- |"]
    lines += [f"| {st['name']} | {st.get('limit_s', '-')} | {st.get('seconds', '-')} | {st['status']} |"
              for st in s["steps"]]
    lines += ["", "## Grades (`python -m autograder grade`, timing part)", ""]
    for name, grade in s["grades"].items():
        if grade is None:
            lines.append(f"- {name}: no results.json")
            continue
        timing = grade["timing"] or {}
        lines += [f"- {name}: {grade['status']}, {grade['score']} / {grade['max_score']}; timing row "
                  f"{timing.get('score')} / {timing.get('max_score')}", "",
                  "```", timing.get("output") or "", "```", ""]
    tests = s["cuda_tests"]
    lines += ["## CUDA tests (`pytest -m cuda`)", ""]
    if tests is None:
        lines.append("- no JUnit report")
    else:
        lines.append(f"- {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped")
        lines += [f"- {t['outcome']}: {t['name']} ({t['seconds']:.1f} s) {t['message']}" for t in tests["tests"]
                  if t["outcome"] != "passed"]
    lines += ["", "## Validation (`gpu_checks/validate_gpu.py`)", ""]
    validation = out / FILES["validation_md"]
    if validation.exists():
        text = validation.read_text()
        lines.append(text[text.find("## Expectations"):] if "## Expectations" in text else text)
    else:
        lines.append("- no validation written (see device-run.log)")
    return "\n".join(lines) + "\n"


def write_summary(kind, started, t0, steps, out, work) -> dict:
    s = summary(kind, started, time.monotonic() - t0, steps, out, work)
    (out / FILES["summary_json"]).write_text(json.dumps(s, indent=1) + "\n")
    (out / FILES["summary_md"]).write_text(markdown(s, out))
    return s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT"), help="default: $OUT")
    parser.add_argument("--cpu-dry-run", action="store_true", default=os.environ.get(DRY_RUN_ENV) == "1",
                        help=f"the same steps on the CPU with CPU-sized configs (or {DRY_RUN_ENV}=1)")
    parser.add_argument("--steps", help="comma-separated step names to run (default: all), e.g. for a rerun")
    parser.add_argument("--total-s", type=float, help="seconds for the whole run (default: 470; dry run 900)")
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("no output folder: set OUT or pass --out")
    kind = "cpu-dry-run" if args.cpu_dry_run else "gpu"
    total_s = args.total_s or TOTAL_S[kind]
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="device-run-"))
    steps = plan(args.cpu_dry_run, work, args.out)
    chosen = set(args.steps.split(",")) if args.steps else {s.name for s in steps}
    unknown = chosen - {s.name for s in steps}
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; the steps are {[s.name for s in steps]}")
    env = os.environ | {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    env.setdefault("HOME", str(work))
    log = work / FILES["log"]
    t0, started = time.monotonic(), datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    print(f"device run ({kind}), {started}: steps {', '.join(s.name for s in steps if s.name in chosen)}; "
          f"{total_s:.0f} s in all; output in {args.out}", flush=True)
    for step in steps:
        if step.name not in chosen:
            continue
        if step.name == "validate":  # last: the time the others left, less the grace its last session needs
            budget = total_s - (time.monotonic() - t0) - VALIDATE_GRACE_S
            step.commands[0] += ["--budget-s", str(round(max(budget, 30)))]
            step.limit_s = max(budget, 30) + VALIDATE_GRACE_S
        print(f"[{time.monotonic() - t0:5.0f} s] {step.name} (limit {step.limit_s:.0f} s) ...", flush=True)
        run_step(step, log, env)
        shutil.copyfile(log, args.out / FILES["log"])
        s = write_summary(kind, started, t0, steps, args.out, work)
        print(f"[{time.monotonic() - t0:5.0f} s] {step.name}: {step.result['status']} in {step.result['seconds']} s",
              flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print((args.out / FILES["summary_md"]).read_text())
    return 0 if s["all_steps_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
