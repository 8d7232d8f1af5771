"""Calibration study: whole timing sessions, repeated, for the reference and the test submissions.

Every calibration and adversarial submission; pass counts, median ratios with their intervals,
seconds per verdict.

    python gpu_checks/study.py --device cpu [--reference-runs 20] [--runs 10] [--adversarial-runs 3]
                               [--out docs/benchmarks/timing-cpu.md]

Each run is a full session as grading runs it (`grade_timing`'s path: fresh workers under the chosen
isolation, a fresh random seed, the rubric's settings for the device, cases after a first failure not
run). Progress goes to stdout, and after every session the figures to OUT.json and the table to OUT.md,
so an interrupted study keeps what it measured (`--render` rewrites OUT.md from OUT.json). Exit
status 1 when an expectation is not met.
gpu_checks/validate_gpu.py runs the CUDA counterpart and shares the table and the suggested rubric lines.
"""
import argparse
import datetime
import functools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from autograder.core.rubric import load  # noqa: E402
from autograder.isolation.host.levels import resolve  # noqa: E402
from gpu_checks.grading import session_environment, time_submission  # noqa: E402
from gpu_checks.harness import REFERENCE_FILE  # noqa: E402
from gpu_checks.session import TimingSetupError  # noqa: E402

HERE = Path(__file__).resolve().parent
CALIBRATION = {path.stem: path for path in sorted((HERE / "calibration").glob("*.py"))}
ADVERSARIAL = {path.stem: path for path in sorted((HERE / "adversarial").glob("*.py"))}
CUDA_ONLY = ("side_stream_loop", "background_load")  # their cheat needs CUDA streams; on CPU they only crash


def expected(name: str) -> str:
    return "passed" if name.startswith("good_") or name == "reference" else "failed"


class Study:
    """Runs sessions and keeps, per submission, one record per session."""

    def __init__(self, rubric, isolation, device: str, log=functools.partial(print, flush=True)):
        self.rubric, self.isolation, self.device, self.log = rubric, isolation, device, log
        self.settings = session_environment(rubric, device)[0]
        self.start = time.monotonic()
        self.items = {}  # name -> {"expected", "runs": [record]}

    def run(self, name: str, path: Path, seed: int | None = None, baseline: bool = False):
        """One whole session; the session (None after a grader error), also recorded under `name`."""
        t0 = time.monotonic()
        try:
            session = time_submission(path, self.rubric, self.isolation, self.device, seed, baseline=baseline,
                                      stop_at_first_failure=not baseline)
        except TimingSetupError as err:
            self.keep(name, {"status": "grader error", "error": str(err), "cases": {}}, t0)
            return None
        self.keep(name, record(session.cases, session.seed, session.failure), t0)
        return session

    def keep(self, name: str, run: dict, started: float) -> None:
        run["seconds"] = round(time.monotonic() - started, 2)
        item = self.items.setdefault(name, {"expected": expected(name), "runs": []})
        item["runs"].append(run)
        case, ratio = worst_case(run) or ("-", "-")
        self.log(f"[{time.monotonic() - self.start:6.0f} s] {name} run {len(item['runs'])}: {run['status']} "
                 f"(expected {item['expected']}; worst ratio {ratio} in {case}; {run['seconds']} s)")

    def all_met(self) -> bool:
        return all(r["status"] == i["expected"] for i in self.items.values() for r in i["runs"])

    def figures(self) -> dict:
        return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "device": self.device, "machine": machine(self.device), "torch": torch.__version__,
                "isolation": self.isolation.level, "elapsed_s": round(time.monotonic() - self.start),
                "all_expectations_met": self.all_met(), "items": self.items}


def record(case_results: list, seed: int, failure: str | None = None) -> dict:
    """One run as data: its verdict and, per case, the decision's figures."""
    passed = failure is None and all(c.status == "passed" for c in case_results)
    return {"status": "passed" if passed else "failed", "seed": seed, "failure": failure,
            "cases": {c.case.name: _case(c) for c in case_results}}


def _case(result) -> dict:
    d = result.decision
    return {"status": result.status, "reasons": result.reasons, "rerun": result.rerun, "pairs": len(result.samples),
            "median": d and round(d.median, 3), "low": d and round(d.low, 3), "high": d and round(d.high, 3),
            "threshold": result.case.config.threshold, "config": result.case.config.name}


def worst_case(record):
    """(case name, median ratio) of the run's slowest timed case, or None when nothing was timed."""
    timed = [(name, c["median"]) for name, c in record["cases"].items() if c["median"] is not None]
    return max(timed, key=lambda t: t[1]) if timed else None


def machine(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor())
    return f"{cpu}, {os.cpu_count()} cores, load average {_read('/proc/loadavg').split()[:3]} at the end"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def table(items: dict) -> list:
    """Markdown rows: verdicts, the worst case's median ratio over runs with its typical interval, time."""
    lines = ["| submission | expected | runs | as expected | worst case's median ratio: median [range] over runs "
             "| its 95% interval (median ends) | seconds per verdict: median [max] "
             "| reasons (first run that has one) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, item in items.items():
        runs = item["runs"]
        met = sum(r["status"] == item["expected"] for r in runs)
        worst = [(w, r) for r in runs if (w := worst_case(r))]
        ratios = [w[1] for w, _ in worst]
        lows = [r["cases"][w[0]]["low"] for w, r in worst]
        highs = [r["cases"][w[0]]["high"] for w, r in worst]
        ratio = f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]" if ratios else "-"
        interval = f"[{statistics.median(lows):.2f}, {statistics.median(highs):.2f}]" if ratios else "-"
        seconds = [r["seconds"] for r in runs]
        reason = next((c["reasons"][0] for r in runs for c in r["cases"].values() if c["reasons"]),
                      next((r.get("failure") or r.get("error") for r in runs if r.get("failure") or r.get("error")),
                           ""))
        reason = reason.replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {name} | {item['expected']} | {len(runs)} | {met} of {len(runs)} | {ratio} | {interval} "
                     f"| {statistics.median(seconds):.1f} [{max(seconds):.1f}] | {reason} |")
    return lines


def per_config(items: dict, settings) -> dict:
    """config -> (slowest case median of any run expected to pass, the fastest of the bad_ runs this
    config catches), timed cases only. A run counts by its slowest case in the config (one failing
    case fails it); a bad variant counts only where its typical run is slower than the typical good
    run (a loop over heads is meant to be caught by the launch-bound config, not by every config)."""
    found = {}
    for config in settings.configs:
        def slowest(run):
            medians = [c["median"] for c in run["cases"].values() if c["config"] == config.name and c["median"]]
            return max(medians, default=None)

        def runs(select):
            return {name: [m for r in item["runs"] if (m := slowest(r)) is not None]
                    for name, item in items.items() if select(name, item)}

        good = [m for ms in runs(lambda name, item: item["expected"] == "passed").values() for m in ms]
        if not good:
            found[config.name] = (None, None)
            continue
        caught = [ms for ms in runs(lambda name, item: name.startswith("bad_")).values()
                  if ms and statistics.median(ms) > statistics.median(good)]
        found[config.name] = (max(good), min((m for ms in caught for m in ms), default=None))
    return found


def suggested_rubric_lines(items: dict, settings, device: str) -> list:
    """The exact rubric lines to paste when a threshold should move: the geometric middle between the
    slowest good run and the fastest bad one, per config, when that differs from the rubric's value."""
    table_name = "parts.timing.cpu.configs" if device == "cpu" else "parts.timing.configs"
    lines = []
    for config in settings.configs:
        good, bad = per_config(items, settings)[config.name]
        if good is None or bad is None:
            lines.append(f"# [{table_name}.{config.name}]: not enough data to suggest a threshold")
        elif good >= bad:
            lines.append(f"# [{table_name}.{config.name}]: no separation (slowest good {good:.2f}, fastest bad "
                         f"{bad:.2f}); these configs cannot tell them apart")
        else:
            middle = round((good * bad) ** 0.5, 1)
            keep = good < config.threshold < bad
            lines += [f"[{table_name}.{config.name}]",
                      f"threshold = {config.threshold if keep else middle:g}  # slowest good median {good:.2f}, "
                      f"fastest bad {bad:.2f}; {'keep the rubric value' if keep else 'CHANGE: paste this'}"]
    return lines


def write(study, out: Path) -> None:
    figures = study.figures()
    out.with_suffix(".json").write_text(json.dumps(figures, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(figures, study.settings))


def markdown(figures: dict, settings) -> str:
    """The study's figures as a page: what ran where, the table, the rubric lines."""
    lines = [f"# Timing calibration study ({figures['device']}), {figures['date']}", "",
             "Written by `python gpu_checks/study.py`; every run is a whole timing session as grading runs it.", "",
             *(f"- {key}: {figures[key]}" for key in ("device", "machine", "torch", "isolation", "elapsed_s",
                                                      "all_expectations_met")), "",
             *table(figures["items"]), "", "Rubric lines (paste those marked CHANGE):", "", "```toml",
             *suggested_rubric_lines(figures["items"], settings, figures["device"]), "```", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--isolation", default="auto", choices=("auto", "process", "sandbox"))
    parser.add_argument("--reference-runs", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10, help="sessions per calibration variant")
    parser.add_argument("--adversarial-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "benchmarks" / "timing-cpu-study")
    parser.add_argument("--render", action="store_true", help="only rewrite OUT.md from OUT.json")
    args = parser.parse_args(argv)
    if args.render:
        figures = json.loads(args.out.with_suffix(".json").read_text())
        settings = session_environment(load(), figures["device"])[0]
        args.out.with_suffix(".md").write_text(markdown(figures, settings))
        return 0 if figures["all_expectations_met"] else 1
    study = Study(load(), resolve(args.isolation), args.device)
    plan = [("reference", REFERENCE_FILE, args.reference_runs)]
    plan += [(name, path, args.runs) for name, path in CALIBRATION.items()]
    plan += [(name, path, args.adversarial_runs) for name, path in ADVERSARIAL.items()
             if args.device == "cuda" or name not in CUDA_ONLY]
    # Round-robin, so that a change in the machine's load over the study hits every submission alike.
    for round_ in range(max(runs for _, _, runs in plan)):
        for name, path, runs in plan:
            if round_ < runs:
                study.run(name, path)
                write(study, args.out)
    print("\n".join(table(study.items)))
    print("\n".join(suggested_rubric_lines(study.items, study.settings, args.device)))
    print(f"all expectations met: {study.all_met()}; figures in {args.out.with_suffix('.json')}")
    return 0 if study.all_met() else 1


if __name__ == "__main__":
    sys.exit(main())
