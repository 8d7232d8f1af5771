"""`python -m gpu_checks`: the timing check from the command line.

    python -m gpu_checks SUBMISSION [--device auto|cuda|cpu]     one submission, every case, with the
                                                                  fused baseline; prints the table
    python -m gpu_checks batch SUBMISSIONS --out TIMING_DIR      time a folder (resumable)
    python -m gpu_checks merge TIMING_DIR RESULTS_DIR            merge timings into results made elsewhere

SUBMISSION exits 0 when it passes or no GPU is present (with --device auto); batch and merge exit 0
when every submission was timed or merged (gpu_checks/batch.py, docs/gpu-checks.md).
"""
import argparse
import sys
from pathlib import Path

from autograder.core.rubric import RUBRIC_FILE, load
from autograder.isolation.host.levels import resolve
from gpu_checks import batch
from gpu_checks.grading import no_cuda_reason, resolve_device, time_submission
from gpu_checks.report import render
from gpu_checks.session import TimingSetupError

COMMANDS = ("batch", "merge")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        return {"batch": batch_command, "merge": merge_command}[argv[0]](argv[1:])
    return one_submission(argv)


def one_submission(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_checks", description=__doc__.split("\n\n")[0],
                                     epilog="also: python -m gpu_checks batch ... | merge ... (each with --help)")
    parser.add_argument("submission", type=Path, help="mhsa.py, or a folder that holds it")
    common_options(parser, default_device="auto")
    parser.add_argument("--seed", type=int, help="replay a session (its seed is printed)")
    args = parser.parse_args(argv)
    path = args.submission / "mhsa.py" if args.submission.is_dir() else args.submission
    if not path.is_file():
        parser.error(f"no such file {path}")
    try:
        device = resolve_device(args.device)
    except TimingSetupError as err:
        print(f"cannot time here: {err}")
        return 2
    if device is None:
        print(f"skipped: {no_cuda_reason()} (--device cpu times on the CPU)")
        return 0
    try:
        session = time_submission(path, load(args.rubric), resolve(args.isolation), device, args.seed,
                                  baseline=True, stop_at_first_failure=False)
    except TimingSetupError as err:
        print(f"cannot time here: {err}")
        return 2
    print(render(session))
    return 0 if session.passed else 1


def batch_command(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_checks batch",
                                     description="Time every submission in a folder, one after another; resumable.")
    parser.add_argument("submissions", type=Path, help="a folder of submissions (.py, .ipynb or folders)")
    parser.add_argument("--out", type=Path, required=True, help="folder for one timing file per submission")
    parser.add_argument("--force", action="store_true", help="time again submissions that have a timing file")
    common_options(parser, default_device="cuda")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    return batch.time_folder(args.submissions, args.out, load(args.rubric), resolve(args.isolation), args.device,
                             force=args.force)


def merge_command(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_checks merge",
                                     description="Put timing rows into results.json files graded elsewhere.")
    parser.add_argument("timing_dir", type=Path, help="the --out folder of `python -m gpu_checks batch`")
    parser.add_argument("results_dir", type=Path,
                        help="a `grade --batch` results folder (NAME.json) or one folder per submission "
                             "(NAME/results.json)")
    parser.add_argument("--rubric", type=Path, default=RUBRIC_FILE)
    args = parser.parse_args(argv)
    for folder in (args.timing_dir, args.results_dir):
        if not folder.is_dir():
            parser.error(f"{folder} is not a folder")
    return batch.merge_folder(args.timing_dir, args.results_dir, load(args.rubric))


def common_options(parser, default_device: str) -> None:
    parser.add_argument("--device", default=default_device, choices=("auto", "cuda", "cpu"),
                        help="cpu: the same check on the CPU with the rubric's [parts.timing.cpu] configs")
    parser.add_argument("--isolation", default="auto", choices=("auto", "process", "sandbox"))
    parser.add_argument("--rubric", type=Path, default=RUBRIC_FILE)


if __name__ == "__main__":
    sys.exit(main())
