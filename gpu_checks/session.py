"""The timing procedure: per case, a correctness gate, warm-up, interleaved pairs, checks, a verdict.

Workers are passed in as role -> object with setup(case, state) and run(case, seed, seq_len, monitor),
so tests drive the whole procedure with scripted clocks and no processes (gpu_checks.harness starts
the real ones). All randomness (inputs, sequence lengths, call order) comes from one seeded
random.Random, so a session can be replayed from its seed.
"""
import random
from dataclasses import dataclass, field

from gpu_checks import checks
from gpu_checks.participants import ParticipantError, Sample
from gpu_checks.stats import Decision, decide, early_failure, pair_ratio

STUDENT, REFERENCE, BASELINE = "student", "reference", "baseline"


class TimingSetupError(RuntimeError):
    """The grader could not time the submission: a fault of the grading machine or its settings, never
    the student's. Raised instead of a verdict."""


class CaseFailed(Exception):
    """The submission failed a case for a reason other than speed (wrong result, flags, crash)."""


@dataclass
class CaseResult:
    case: object
    status: str = "not run"  # "passed" | "failed" | "not run"
    reasons: list = field(default_factory=list)
    decision: Decision | None = None
    samples: list = field(default_factory=list)  # the pairs the decision used
    rerun: bool = False
    device: dict = field(default_factory=dict)  # the reference worker's: device name, uuid, torch version


@dataclass
class SessionResult:
    cases: list
    seed: int
    device: str  # "cuda" or "cpu": what was timed
    failure: str | None = None  # a failure before any case could run, e.g. an import error

    @property
    def passed(self) -> bool:
        return self.failure is None and all(c.status == "passed" for c in self.cases)


def guarded(role: str, action):
    """Runs a worker action; the student's failures fail the case, anyone else's is the grader's, except
    running out of GPU memory, which the student's process can cause by holding on to it."""
    try:
        return action()
    except ParticipantError as err:
        if role == STUDENT:
            raise CaseFailed(f"your code {err}") from None
        if "OutOfMemoryError" in str(err):
            raise CaseFailed(f"the {role} ran out of GPU memory beside your code: {err}") from None
        raise TimingSetupError(f"the {role} {err}") from None


def run_cases(cases, workers: dict, settings, weights, seed: int, stop_at_first_failure: bool = True) -> list:
    """`weights(case, seed)` gives the state_dict both sides load; drawn afresh for every case."""
    rng = random.Random(seed)
    results = []
    for case in cases:
        if stop_at_first_failure and any(r.status == "failed" for r in results):
            results.append(CaseResult(case))
            continue
        results.append(measure_case(case, workers, weights(case, rng.getrandbits(63)), settings, rng))
    return results


def measure_case(case, workers: dict, state: dict, settings, rng: random.Random) -> CaseResult:
    result = CaseResult(case)
    threshold = case.config.threshold
    try:
        result.device = _setup(case, workers, state)
        _pairs(case, workers, settings, rng, settings.check_calls, "before timing")
        _pairs(case, workers, settings, rng, settings.warmup_pairs, "during warm-up")
        samples = _pairs(case, workers, settings, rng, settings.early_pairs, "on a timed call")
        decision = early_failure(_ratios(samples), threshold, settings.early_fail_factor, settings.confidence)
        if decision is None:
            samples += _pairs(case, workers, settings, rng, settings.pairs - settings.early_pairs, "on a timed call")
            decision = decide(_ratios(samples), threshold, settings.confidence)
        if decision.verdict == "undecided":
            result.rerun = True
            samples = _pairs(case, workers, settings, rng, settings.rerun_pairs, "on a timed call")
            decision = decide(_ratios(samples), threshold, settings.confidence, final=True)
    except CaseFailed as failure:
        result.status, result.reasons = "failed", [str(failure)]
        return result
    misconfigured = checks.peak_misconfigured(samples, case.dtype, settings.peak_tflops[case.dtype])
    if misconfigured:
        raise TimingSetupError(misconfigured)
    result.decision, result.samples = decision, samples
    problems = [checks.out_of_band_problem(samples, settings.out_of_band_slack_ms, settings.out_of_band_fraction),
                checks.peak_review(samples, case.dtype, settings.peak_tflops[case.dtype])]
    if decision.verdict == "fail":
        problems.insert(0, _too_slow(decision, threshold, settings))
    result.reasons = [p for p in problems if p]
    result.status = "failed" if result.reasons else "passed"
    return result


def check_drift(results: list, reference, settings, rng: random.Random) -> None:
    """Once the student's worker is gone: times the reference alone on the sequence lengths of each
    passed case's last pairs, and flags a case whose reference ran slower beside the student."""
    for result in results:
        if result.status != "passed":
            continue
        def alone(seq_len):
            return guarded(REFERENCE, lambda: reference.run(result.case, rng.getrandbits(63), seq_len, False))

        tail = result.samples[-settings.solo_calls:]
        alone(tail[0].seq_len)  # warm-up
        slowdowns = [s.times[REFERENCE].host_ms / alone(s.seq_len).host_ms for s in tail]
        review = checks.drift_review(slowdowns, settings.drift_tolerance)
        if review:
            result.status, result.reasons = "failed", [review]


def _setup(case, workers, state) -> dict:
    infos = {role: guarded(role, lambda w=w: w.setup(case, state)) for role, w in workers.items()}
    student, reference = infos[STUDENT], infos[REFERENCE]
    if student["forbidden"]:
        raise CaseFailed(f"your MultiHeadSelfAttention uses {', '.join(map(str, student['forbidden']))}, "
                         "which this assignment forbids")
    if student["uuid"] != reference["uuid"]:
        raise CaseFailed("your code's process ran on another device than the reference's")
    return reference


def _pairs(case, workers, settings, rng, count: int, stage: str) -> list:
    """`count` rounds in which every worker runs the same fresh inputs, in a random order. The first
    stage runs under the forbidden-API monitor and is not timed: wrong code is never timed."""
    monitor = stage == "before timing"
    samples = []
    for _ in range(count):
        seq_len, seed = rng.choice(case.config.seq_lens), rng.getrandbits(63)
        order = list(workers)
        rng.shuffle(order)
        times = {role: guarded(role, lambda role=role: workers[role].run(case, seed, seq_len, monitor))
                 for role in order}
        _verify(times, settings.rtol[case.dtype], stage)
        samples.append(Sample(seq_len, case.flops(seq_len), times))
    return samples


def _verify(times: dict, rtol: float, stage: str) -> None:
    reference = times[REFERENCE]
    problem = checks.reference_problem(reference)
    if problem:
        raise TimingSetupError(f"the reference {problem}")
    for role, measured in times.items():
        if role == REFERENCE:
            continue
        problems = checks.call_problems(measured, reference, rtol)
        if role == BASELINE and problems:
            raise TimingSetupError(f"the baseline disagrees with the reference: {'; '.join(problems)}")
        if role == STUDENT and measured.forbidden:
            problems.append(f"used {', '.join(measured.forbidden)}, which this assignment forbids")
        if problems:
            raise CaseFailed(f"{stage}, your code: {'; '.join(problems)}")


def _ratios(samples) -> list:
    return [pair_ratio(s.times[STUDENT], s.times[REFERENCE]) for s in samples]


def _too_slow(decision: Decision, threshold: float, settings) -> str:
    how = {"interval": f"its {settings.confidence:.0%} interval [{decision.low:.2f}, {decision.high:.2f}]",
           "median": f"its interval [{decision.low:.2f}, {decision.high:.2f}] straddled {threshold:g} after the "
                     "rerun, so the median decided",
           "early": f"the median of the first {settings.early_pairs} pairs was over "
                    f"{threshold * settings.early_fail_factor:g}x, so timing stopped early"}[decision.basis]
    return f"your code took {decision.median:.2f}x the reference's time ({how}); at most {threshold:g}x passes"
