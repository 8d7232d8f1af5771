"""`python -m gpu_checks SUBMISSION`: times a submission against the reference and the fused baseline,
every case to the end, and prints the table. Exit status 0 when it passes or no GPU is present."""
import argparse
import sys
from pathlib import Path

import torch

from autograder.isolation import resolve
from autograder.rubric import RUBRIC_FILE, load
from gpu_checks.grading import no_cuda_reason, time_submission
from gpu_checks.report import render


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_checks", description=__doc__.split("\n\n")[0])
    parser.add_argument("submission", type=Path, help="mhsa.py, or a folder that holds it")
    parser.add_argument("--isolation", default="auto", choices=("auto", "process", "sandbox"))
    parser.add_argument("--rubric", type=Path, default=RUBRIC_FILE)
    parser.add_argument("--seed", type=int, help="replay a session (its seed is printed)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"skipped: {no_cuda_reason()}")
        return 0
    path = args.submission / "mhsa.py" if args.submission.is_dir() else args.submission
    if not path.is_file():
        parser.error(f"no such file {path}")
    session = time_submission(path, load(args.rubric), resolve(args.isolation), "cuda", args.seed,
                              baseline=True, stop_at_first_failure=False)
    print(render(session))
    return 0 if session.passed else 1


if __name__ == "__main__":
    sys.exit(main())
