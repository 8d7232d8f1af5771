"""The rubric part `timing`: what the grading engine, the command line and the validation script call."""
import dataclasses
import os
import secrets
from pathlib import Path

import torch

from gpu_checks.harness import run_session
from gpu_checks.report import render
from gpu_checks.session import SessionResult, TimingSetupError
from gpu_checks.settings import DEVICES, TimingSettings

REQUIRE_CUDA_ENV = "AUTOGRADER_REQUIRE_CUDA"


def grade_timing(submission_path: Path, rubric, isolation, *, hidden=(), device: str | None = None,
                 seed: int | None = None) -> dict:
    """Times the submission's MultiHeadSelfAttention against the reference on this machine.

    `device`: "cuda" (the GPU; a TimingSetupError when there is none), "cpu" (the same procedure on
    the CPU with the rubric's [parts.timing.cpu] configs), or None / "auto" (CUDA when present;
    otherwise skipped, or failed when the rubric requires CUDA). Returns {"status": "passed" |
    "failed" | "skipped", "score", "max_score", "output", "device"}; `output` names the device timed.
    Skipped has max_score 0, so the part drops out of the total. `hidden`: more paths the workers
    must not see (results, batch folders); `seed` replays a session.
    Raises gpu_checks.session.TimingSetupError when the grader itself cannot time (not the student's fault).
    """
    part = rubric.parts.get("timing")
    if part is None:
        return _result("skipped", 0.0, 0.0, "the rubric has no timing part", None)
    device = resolve_device(device)
    if device is None:
        reason = no_cuda_reason()
        if part.require_cuda or os.environ.get(REQUIRE_CUDA_ENV) == "1":
            return _result("failed", 0.0, part.points, f"CUDA timing is required but could not run: {reason}", None)
        return {**_result("skipped", 0.0, 0.0, f"CUDA timing skipped: {reason}", None),
                "left_out_because": "not timed: no CUDA device"}
    session = time_submission(submission_path, rubric, isolation, device, seed, hidden)
    passed = session.passed
    return _result("passed" if passed else "failed", part.points if passed else 0.0, part.points, render(session),
                   device)


def resolve_device(requested: str | None) -> str | None:
    """"cpu" or "cuda" as asked; None or "auto": "cuda" when present, else None (not timed)."""
    if requested in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else None
    if requested not in DEVICES:
        raise ValueError(f"the timing device must be one of auto, {', '.join(DEVICES)}; got {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise TimingSetupError(f"timing on cuda was asked for, but {no_cuda_reason()}")
    return requested


def time_submission(submission_path: Path, rubric, isolation, device: str, seed: int | None, hidden=(),
                    baseline: bool = False, stop_at_first_failure: bool = True) -> SessionResult:
    """The whole session with the rubric's settings; a fresh random seed unless one is given."""
    settings, limits, hidden = session_environment(rubric, device, hidden)
    return run_session(Path(submission_path), settings, isolation, limits, hidden, device,
                       secrets.randbits(32) if seed is None else seed, baseline, stop_at_first_failure)


def session_environment(rubric, device: str, hidden=()) -> tuple:
    """(settings, worker limits, hidden paths) of a timing session under this rubric."""
    settings = TimingSettings.for_device(rubric.parts["timing"].settings, device)
    limits = dataclasses.replace(
        rubric.limits, call_timeout=settings.call_timeout_s,
        # No address-space cap on CUDA: the driver reserves far more virtual memory than any
        # RLIMIT_AS that would still protect the machine.
        memory_mb=0 if device.startswith("cuda") else rubric.limits.memory_mb)
    return settings, limits, [Path(p) for p in (*rubric.hidden, *hidden) if Path(p).exists()]


def no_cuda_reason() -> str:
    return f"no CUDA device on this machine (torch {torch.__version__}: torch.cuda.is_available() is False)"


def _result(status, score, max_score, output, device) -> dict:
    return {"status": status, "score": score, "max_score": max_score, "output": output, "device": device}
