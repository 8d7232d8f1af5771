"""Validates everything CUDA-related in gpu_checks on one GPU, in under 5 minutes, and writes the figures.

    python gpu_checks/validate_gpu.py [--out docs/benchmarks] [--isolation auto]
    python gpu_checks/validate_gpu.py --device cpu --out /tmp/dry-run   # the script itself, without a GPU

From a fresh checkout after `pip install -r requirements.txt`. With the rubric's own CUDA settings and
the isolation grading uses (the bubblewrap sandbox where it works, so the CUDA binds are checked too):
  - CUDA is reachable inside the timing worker (else it stops at once with the reason);
  - the reference against itself passes 10 of 10 runs (9 on one pair of workers, 1 full session with
    the drift check), and the loop over heads fails 10 of 10;
  - every calibration variant gets the verdict its name promises, with its whole table (and the fused
    sdpa baseline's TFLOP/s);
  - every adversarial submission fails (cheats on clocks, flags, caches, side streams, background load).
Prints the table and the exact rubric lines to paste when a threshold should move; writes
gpu-validation-DATE.md and .json (date, GPU, torch and CUDA versions, every ratio) under --out. Exits 1
when any expectation is not met. Items left when the time budget runs out are reported as not run,
never as passed.
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

from autograder.core.rubric import RUBRIC_FILE, load  # noqa: E402
from autograder.isolation.host.levels import resolve  # noqa: E402
from gpu_checks.grading import session_environment  # noqa: E402
from gpu_checks.harness import REFERENCE_FILE, reference_weights, timing_workers  # noqa: E402
from gpu_checks.report import render  # noqa: E402
from gpu_checks.session import REFERENCE, STUDENT, TimingSetupError, run_cases  # noqa: E402
from gpu_checks.study import (ADVERSARIAL, CALIBRATION, CUDA_ONLY, Study, expected, record,  # noqa: E402
                              suggested_rubric_lines, table)

HERE = Path(__file__).resolve().parent
BUDGET_S = 280
REPEATS = 10


class Validation(Study):
    """The study on CUDA, within a time budget, keeping the full sessions' tables for the report."""

    def __init__(self, rubric, isolation, device: str = "cuda", budget_s: float = BUDGET_S, repeats: int = REPEATS):
        super().__init__(rubric, isolation, device)
        self.budget_s, self.repeats = budget_s, repeats
        self.tables = []  # (name, rendered session)

    def out_of_time(self) -> bool:
        return time.monotonic() - self.start > self.budget_s

    def single(self, name: str, path: Path, full: bool, seed: int = 0):
        if self.out_of_time():
            self.items.setdefault(name, {"expected": expected(name), "runs": []})
            return
        session = self.run(name, path, seed=seed, baseline=full)
        if session is not None:
            self.tables.append((name, render(session)))

    def repeated(self, name: str, path: Path) -> bool:
        """repeats - 1 runs on one pair of workers (the decision's stability), then one full session.
        False after a grader error (recorded), e.g. CUDA out of the sandbox's reach."""
        _, limits, hidden = session_environment(self.rubric, self.device)
        t0 = time.monotonic()
        try:
            with timing_workers({STUDENT: path, REFERENCE: REFERENCE_FILE}, self.device, self.isolation, limits,
                                hidden) as workers:
                for seed in range(self.repeats - 1):
                    if self.out_of_time():
                        break
                    results = run_cases(self.settings.cases(), workers, self.settings, reference_weights, seed)
                    self.keep(name, record(results, seed), t0)
                    t0 = time.monotonic()
        except TimingSetupError as err:
            self.keep(name, {"status": "grader error", "error": str(err), "cases": {}}, t0)
            print(f"grader error: {err}")
            return False
        self.single(name, path, full=False, seed=self.repeats)
        return True


def write(validation: Validation, out: Path) -> bool:
    figures = validation.figures()
    ok = figures["all_expectations_met"] and all(i["runs"] for i in validation.items.values())
    now = datetime.datetime.now(datetime.timezone.utc)
    header = {"date": figures["date"], "device": validation.device, "machine": figures["machine"],
              "torch": torch.__version__,
              "cuda": torch.version.cuda, "isolation": validation.isolation.level, "budget_s": validation.budget_s,
              "elapsed_s": figures["elapsed_s"], "all_expectations_met": ok}
    rubric_lines = suggested_rubric_lines(validation.items, validation.settings, validation.device)
    lines = [f"# gpu_checks validation, {header['date']}", "", *(f"- {k}: {v}" for k, v in header.items()), "",
             "## Expectations", "", *table(validation.items), "",
             "## Rubric lines (rubric.toml): paste those marked CHANGE", "", "```toml", *rubric_lines, "```", "",
             "## Tables", ""]
    for name, text in validation.tables:
        lines += [f"### {name}", "", "```", text, "```", ""]
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{'gpu' if validation.device == 'cuda' else 'cpu-dry-run'}-validation-{now:%Y-%m-%d}"
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    stem.with_suffix(".json").write_text(json.dumps({**figures, **header}, indent=1) + "\n")
    print("\n".join(table(validation.items)))
    print("\nrubric.toml lines (paste those marked CHANGE):\n" + "\n".join(rubric_lines))
    print(f"wrote {stem}.md and .json; all expectations met: {ok}")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "benchmarks")
    parser.add_argument("--isolation", default="auto", choices=("auto", "process", "sandbox"))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: a dry run of this script with the rubric's CPU settings (validates nothing on CUDA)")
    parser.add_argument("--rubric", type=Path, default=RUBRIC_FILE)
    parser.add_argument("--budget-s", type=float, default=BUDGET_S,
                        help="no new session starts after this many seconds (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help="runs of the reference and of the loop over heads (default %(default)s)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to validate")
        return 1
    validation = Validation(load(args.rubric), resolve(args.isolation), args.device, args.budget_s, args.repeats)
    if not validation.repeated("reference", REFERENCE_FILE):  # nothing else can run either
        write(validation, args.out)
        return 1
    validation.repeated("bad_loop_heads", CALIBRATION["bad_loop_heads"])
    for name, path in CALIBRATION.items():
        if name != "bad_loop_heads":
            validation.single(name, path, full=True)
    for name, path in ADVERSARIAL.items():
        if args.device == "cuda" or name not in CUDA_ONLY:
            validation.single(name, path, full=False)
    return 0 if write(validation, args.out) else 1


if __name__ == "__main__":
    sys.exit(main())
