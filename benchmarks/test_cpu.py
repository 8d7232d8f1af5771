"""What a test file costs CI: its wall time and the machine's CPU over a pytest run of it, here and
in an earlier checkout, one after the other.

    git worktree add /tmp/before REV
    python benchmarks/test_cpu.py --baseline /tmp/before tests/test_adversarial.py [pytest's options]
    python benchmarks/test_cpu.py --template-starts 4   # what starting a worker template costs

CI keeps both cores busy (docs/benchmarks/test-durations.md), so its length follows the CPU its
tests spend, not their wall time. The CPU is the whole machine's (/proc/stat, as benchmarks/grading.py
reads it): run this on an otherwise idle machine. getrusage cannot stand in for it, since the sandbox's
processes are reaped by nobody that reports their time to the test process.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.grading import machine_cpu  # noqa: E402


def pytest_run(checkout: Path, args) -> tuple[float, float, int]:
    """(wall seconds, machine CPU seconds, exit status) of `pytest ARGS` in `checkout`."""
    started, cpu = time.monotonic(), machine_cpu()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=checkout,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=os.environ | {"PYTHONPATH": str(checkout)})
    return time.monotonic() - started, machine_cpu() - cpu, done.returncode


def template_starts(count: int) -> float:
    """Machine CPU seconds of starting `count` worker templates at the strongest level, each until it
    is ready, then stopping it."""
    from autograder.isolation.host import worker_template
    from autograder.isolation.host.levels import resolve

    cpu = machine_cpu()
    for _ in range(count):
        template = worker_template.WorkerTemplate(resolve("auto"), [], log=worker_template.QUIET)
        try:
            if template.serving_folder() is None:
                raise SystemExit(f"no template here: {template.given_up}")
        finally:
            template.stop()
    return machine_cpu() - cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytest_args", nargs="*", help="what to run, as pytest takes it (a test file)")
    parser.add_argument("--baseline", type=Path, help="an earlier checkout, run first with the same arguments")
    parser.add_argument("--template-starts", type=int, default=0)
    args, more = parser.parse_known_args(argv)  # pytest's own options (-k ...) go to pytest
    pytest_args = [*args.pytest_args, *more]
    if args.template_starts:
        cpu = template_starts(args.template_starts)
        print(f"{args.template_starts} worker template starts: {cpu:.1f} s of CPU, {cpu / args.template_starts:.2f} s each")
    checkouts = [(f"baseline {args.baseline}", args.baseline)] if args.baseline else []
    for label, checkout in [*checkouts, ("this checkout", REPO)] if pytest_args else []:
        wall, cpu, status = pytest_run(checkout, pytest_args)
        print(f"{label}: {wall:.0f} s wall, {cpu:.0f} s of machine CPU, pytest exit {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
