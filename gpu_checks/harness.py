"""Starts the timing workers for one submission and runs the session in them.

Student, reference and (for reports) the fused baseline each get their own worker, started alike and
under the same isolation, so that interpreter, threads, limits and sandbox cost the same on every side.
"""
import contextlib
import functools
import importlib.util
import random
from pathlib import Path

import torch

from autograder.core import paths
from gpu_checks.participants import TimingWorker
from gpu_checks.session import (BASELINE, REFERENCE, STUDENT, CaseFailed, SessionResult, TimingSetupError,
                                check_drift, guarded, run_cases)

REFERENCE_FILE = paths.REFERENCE
BASELINE_FILE = Path(__file__).resolve().parent / "baselines" / "fused_mhsa.py"


def run_session(submission: Path, settings, isolation, limits, hidden, device: str, seed: int,
                baseline: bool = False, stop_at_first_failure: bool = True) -> SessionResult:
    paths = {STUDENT: submission, REFERENCE: REFERENCE_FILE} | ({BASELINE: BASELINE_FILE} if baseline else {})
    try:
        with timing_workers(paths, device, isolation, limits, hidden) as workers:
            results = run_cases(settings.cases(), workers, settings, reference_weights, seed, stop_at_first_failure)
            if all(r.status == "passed" for r in results):
                for role in (STUDENT, BASELINE):
                    if role in workers:
                        workers.pop(role).close()
                check_drift(results, workers[REFERENCE], settings, random.Random(seed))
    except CaseFailed as failure:  # the submission could not be imported
        return SessionResult([], seed, device, failure=str(failure))
    return SessionResult(results, seed, device)


@contextlib.contextmanager
def timing_workers(paths: dict, device: str, isolation, limits, hidden):
    """role -> started and imported TimingWorker; all start before any is waited for, so imports overlap."""
    workers = {}
    try:
        for role, path in paths.items():
            workers[role] = TimingWorker(path, device, isolation, limits, hidden)
        for role, worker in workers.items():
            guarded(role, worker.wait_ready)
        if device == "cuda":
            require_cuda_inside(workers[REFERENCE], isolation)
        yield workers
    finally:
        for worker in workers.values():
            worker.close()


def require_cuda_inside(reference, isolation) -> None:
    """The grader sees CUDA (or it would not time on it); a worker that does not is the sandbox's fault.
    Asked of the reference's worker, which runs trusted code under the same isolation as the student's."""
    reachable, reason = guarded(REFERENCE, reference.cuda_reachable)
    if not reachable:
        raise TimingSetupError(
            f"CUDA works in the grader's process but not inside the timing worker ({isolation.level} isolation): "
            f"{reason}. Under bubblewrap the worker sees only the device nodes and driver libraries that "
            "autograder/isolation/host/cuda_binds.py finds; check that `ldconfig -p` lists libcuda.so.1 and that /dev/nvidia* exist.")


def reference_weights(case, seed: int) -> dict:
    """A freshly initialized reference module's state_dict: the contract's names, shapes and scale."""
    with torch.random.fork_rng(devices=[]):  # leaves the grader's own random state alone
        torch.manual_seed(seed)
        return _reference_module().MultiHeadSelfAttention(case.config.d_model, case.config.num_heads).state_dict()


@functools.cache
def _reference_module():
    spec = importlib.util.spec_from_file_location("mhsa_reference_for_timing", REFERENCE_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
