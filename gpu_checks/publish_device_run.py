"""Turns what a device run brought back (gpu_checks/device_run.py's OUT folder) into the benchmark page.

    python gpu_checks/publish_device_run.py FOLDER [--out docs/benchmarks]

Writes OUT/gpu-validation-DATE.md and .json; a CPU dry run's folder gives cpu-dry-run-device-run-DATE.*
instead, so that CPU figures can never pass for GPU ones. The page is the run's summary: the GPU, its
driver, torch and CUDA; each step's seconds and result; validate_gpu's expectations (verdicts, ratios,
stability over repeated runs, seconds per verdict), its suggested rubric lines and tables; the timing
tables of the two grades; the CUDA tests. The JSON holds the summary and validate_gpu's figures.
Exit status 1 when FOLDER has no summary.json.
"""
import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_checks.device_run import FILES  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def publish(folder: Path, out: Path) -> Path:
    summary = json.loads((folder / FILES["summary_json"]).read_text())
    try:
        validation = json.loads((folder / FILES["validation_json"]).read_text())
    except (OSError, ValueError):
        validation = None
    date = summary["started"][:10]
    stem = out / (f"gpu-validation-{date}" if summary["kind"] == "gpu" else f"{summary['kind']}-device-run-{date}")
    body = (folder / FILES["summary_md"]).read_text()
    intro = ("Produced by one call of `gpu_checks/device_run.sh` on the machine named below and published with "
             "`python gpu_checks/publish_device_run.py` (docs/gpu-checks.md). Steps that timed out or failed are "
             "listed as such; items validate_gpu did not reach are not run, never passed.")
    title, _, rest = body.partition("\n")
    out.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".md").write_text(f"{title}\n\n{intro}\n{rest}")
    stem.with_suffix(".json").write_text(json.dumps({"summary": summary, "validation": validation}, indent=1) + "\n")
    return stem


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the device run's OUT folder, as it came back")
    parser.add_argument("--out", type=Path, default=DOCS, help="default: docs/benchmarks")
    args = parser.parse_args(argv)
    if not (args.folder / FILES["summary_json"]).is_file():
        print(f"no {FILES['summary_json']} in {args.folder}: not a device run's output", file=sys.stderr)
        return 1
    stem = publish(args.folder, args.out)
    print(f"wrote {stem}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
