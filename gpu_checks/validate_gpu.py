"""Validates everything CUDA-related in gpu_checks on one GPU, in under 5 minutes, and writes the figures.

    python gpu_checks/validate_gpu.py [--out docs/benchmarks] [--isolation auto]

Checks, with the rubric's own settings and isolation:
  - the reference against itself passes 10 of 10 runs (9 on one pair of workers, 1 full session with
    the drift check), and the loop over heads fails 10 of 10;
  - every calibration variant gets the verdict its name promises, with its whole table (and the fused
    sdpa baseline's TFLOP/s), and the ratios suggest a threshold per config;
  - every adversarial submission fails (cheats on clocks, flags, caches, side streams, background load).
Writes gpu-validation-DATE.md and .json (date, GPU, torch and CUDA versions, every ratio) under --out,
and exits 1 when any expectation is not met. Items left when the time budget runs out are reported as
not run, never as passed.
"""
import argparse
import datetime
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from autograder.isolation import resolve  # noqa: E402
from autograder.rubric import load  # noqa: E402
from gpu_checks.grading import session_environment, time_submission  # noqa: E402
from gpu_checks.harness import REFERENCE_FILE, reference_weights, timing_workers  # noqa: E402
from gpu_checks.report import render  # noqa: E402
from gpu_checks.session import REFERENCE, STUDENT, SessionResult, TimingSetupError, run_cases  # noqa: E402

HERE = Path(__file__).resolve().parent
BUDGET_S = 280
REPEATS = 10
CALIBRATION = {path.stem: path for path in sorted((HERE / "calibration").glob("*.py"))}
ADVERSARIAL = {path.stem: path for path in sorted((HERE / "adversarial").glob("*.py"))}


def expected(name: str) -> str:
    return "passed" if name.startswith("good_") or name == "reference" else "failed"


class Validation:
    def __init__(self, rubric, isolation, device: str = "cuda"):
        self.rubric, self.isolation, self.device = rubric, isolation, device
        self.settings = session_environment(rubric, device)[0]
        self.start = time.monotonic()
        self.items = []  # {"name", "expected", "statuses", "sessions"}

    def out_of_time(self) -> bool:
        return time.monotonic() - self.start > BUDGET_S

    def record(self, name, statuses, sessions=()):
        item = {"name": name, "expected": expected(name), "statuses": statuses, "sessions": list(sessions)}
        self.items.append(item)
        print(f"[{time.monotonic() - self.start:5.0f} s] {name}: {statuses} (expected {item['expected']})", flush=True)

    def session(self, path: Path, full: bool, seed: int) -> SessionResult:
        return time_submission(path, self.rubric, self.isolation, self.device, seed, baseline=full,
                               stop_at_first_failure=not full)

    def repeated(self, name: str, path: Path):
        """REPEATS - 1 runs on one pair of workers (the decision's stability), then one full session."""
        statuses, sessions = [], []
        _, limits, hidden = session_environment(self.rubric, self.device)
        try:
            with timing_workers({STUDENT: path, REFERENCE: REFERENCE_FILE}, self.device, self.isolation, limits,
                                hidden) as workers:
                for seed in range(REPEATS - 1):
                    if self.out_of_time():
                        break
                    results = run_cases(self.settings.cases(), workers, self.settings, reference_weights, seed)
                    statuses.append("passed" if all(r.status == "passed" for r in results) else "failed")
            if not self.out_of_time():
                sessions.append(self.session(path, full=False, seed=REPEATS))
                statuses.append("passed" if sessions[0].passed else "failed")
        except TimingSetupError as err:  # recorded, and the other items still run
            statuses.append(f"grader error: {err}")
        self.record(name, statuses, sessions)

    def single(self, name: str, path: Path, full: bool):
        if self.out_of_time():
            return self.record(name, [])
        try:
            session = self.session(path, full, seed=0)
        except TimingSetupError as err:
            return self.record(name, [f"grader error: {err}"])
        self.record(name, ["passed" if session.passed else "failed"], [session])


def suggested_thresholds(items, settings) -> list:
    """Per config: the slowest good variant's worst case against each bad variant's worst case."""
    lines = []
    for config in settings.configs:
        def worst(item):
            medians = [c.decision.median for s in item["sessions"] for c in s.cases
                       if c.decision and c.case.config.name == config.name]
            return max(medians, default=None)

        good = [worst(i) for i in items if i["expected"] == "passed" and i["sessions"]]
        bad = {i["name"]: worst(i) for i in items if i["name"].startswith("bad_") and i["sessions"]}
        good_max = max((g for g in good if g is not None), default=None)
        bad_min = min((b for b in bad.values() if b is not None), default=None)
        if good_max is None or bad_min is None:
            lines.append(f"- {config.name}: not enough data")
        elif good_max >= bad_min:
            lines.append(f"- {config.name}: no separation (slowest good {good_max:.2f}, fastest bad {bad_min:.2f})")
        else:
            bads = ", ".join(f"{k} {v:.2f}" for k, v in bad.items())
            lines.append(f"- {config.name}: slowest good {good_max:.2f}, bad {bads}; "
                         f"geometric middle {(good_max * bad_min) ** 0.5:.2f} (rubric: {config.threshold:g})")
    return lines


def write(validation, out: Path) -> bool:
    device = next((c.device for i in validation.items for s in i["sessions"] for c in s.cases if c.device), {})
    now = datetime.datetime.now(datetime.timezone.utc)
    ok = all(i["statuses"] and all(s == i["expected"] for s in i["statuses"]) for i in validation.items)
    header = {"date": now.isoformat(timespec="seconds"), "gpu": device.get("device"), "torch": torch.__version__,
              "cuda": torch.version.cuda, "isolation": validation.isolation.level,
              "elapsed_s": round(time.monotonic() - validation.start), "all_expectations_met": ok}
    lines = [f"# gpu_checks validation, {header['date']}", "",
             *(f"- {k}: {v}" for k, v in header.items()), "", "## Expectations", "",
             "| submission | expected | runs | verdicts |", "| --- | --- | --- | --- |",
             *(f"| {i['name']} | {i['expected']} | {len(i['statuses'])} | {', '.join(i['statuses']) or 'not run'} |"
               for i in validation.items),
             "", "## Suggested thresholds (median ratios)", "",
             *suggested_thresholds(validation.items, validation.settings),
             "", "## Tables", ""]
    for item in validation.items:
        for session in item["sessions"]:
            lines += [f"### {item['name']}", "", "```", render(session), "```", ""]
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"gpu-validation-{now:%Y-%m-%d}"
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    ratios = {i["name"]: [{c.case.name: (c.decision.median, c.decision.low, c.decision.high) if c.decision else None
                           for c in s.cases} for s in i["sessions"]] for i in validation.items}
    stem.with_suffix(".json").write_text(json.dumps({**header, "expectations": [
        {k: i[k] for k in ("name", "expected", "statuses")} for i in validation.items], "ratios": ratios}, indent=1))
    print(f"wrote {stem}.md and .json; all expectations met: {ok}")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "benchmarks")
    parser.add_argument("--isolation", default="auto", choices=("auto", "process", "sandbox"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to validate")
        return 1
    validation = Validation(load(), resolve(args.isolation))
    validation.repeated("reference", REFERENCE_FILE)
    validation.repeated("bad_loop_heads", CALIBRATION["bad_loop_heads"])
    for name, path in CALIBRATION.items():
        if name != "bad_loop_heads":
            validation.single(name, path, full=True)
    for name, path in ADVERSARIAL.items():
        validation.single(name, path, full=False)
    return 0 if write(validation, args.out) else 1


if __name__ == "__main__":
    sys.exit(main())
