"""Anti-cheat checks on what the workers report: pure functions that return a problem in words, or None.

Per call: the student's outputs (and gradients) against the reference's on the same inputs, NaN,
precision flags, and clocks that claim more than the grader saw. Per case: time spent outside the
timed region, throughput beyond the hardware, and a reference slowed down by the submission's
presence. Speed itself is judged in stats.py.
"""
from gpu_checks.stats import median

TINY = 1e-30


def call_problems(student, reference, rtol: float) -> list:
    """What is wrong with one of the student's calls, compared with the reference's on the same inputs."""
    problems = [f"changed {flag} from {pinned} to {after} (the grader pins precision flags so that both "
                f"sides compute the same thing)" for flag, (pinned, after) in student.flags_changed.items()]
    for name, expected in reference.fingerprint.items():
        problem = tensor_problem(name, student.fingerprint.get(name), expected, rtol)
        if problem:
            problems.append(problem)
    # The host clock only: on CPU the device clock sums the CPU time of all threads, which may exceed the wall.
    if student.host_ms > student.roundtrip_ms:
        problems.append("reported a call longer than the whole request took on the grader's clock "
                        "(the worker's clocks were tampered with)")
    return problems


def tensor_problem(name: str, got, expected: dict, rtol: float):
    if got is None:
        return f"the {name} is missing or not a plain torch.Tensor"
    if [got[k] for k in ("shape", "dtype", "device")] != [expected[k] for k in ("shape", "dtype", "device")]:
        return (f"the {name} is {got['dtype']} of shape {tuple(got['shape'])} on {got['device']}, the "
                f"reference's {expected['dtype']} of shape {tuple(expected['shape'])} on {expected['device']}")
    if got["nonfinite"] > expected["nonfinite"]:
        return f"the {name} holds {got['nonfinite']} NaN or infinite values"
    # Each probe difference is a Gaussian with the error's L2 norm as its standard deviation.
    error = max(abs(a - b) for a, b in zip(got["probes"], expected["probes"])) / max(expected["norm"], TINY)
    if not error <= rtol:  # also true for NaN
        return f"the {name} is off by about {error:.1e} of its norm ({rtol:.0e} allowed)"
    return None


def reference_problem(measurement):
    """A reference call that is not a clean one means the grader itself is broken."""
    if measurement.flags_changed or any(p is None or p["nonfinite"] for p in measurement.fingerprint.values()):
        return "produced a non-finite or malformed result, or changed a precision flag"
    return None


def achieved_tflops(samples, role: str, clock: str = "device_ms") -> float:
    return median([s.flops / (getattr(s.times[role], clock) * 1e9) for s in samples])


def out_of_band_problem(samples, slack_ms: float, fraction: float):
    """Time the grader saw that the student's worker did not report, beyond the reference's: the
    request does the same untimed work on both sides (inputs, flush, fingerprint), so extra time there
    is work the call deferred past its timed region, or clocks that under-report. Time the worker spent
    waiting for a core (read by the grader) is left out: on a shared CPU it grows with the call's length."""
    def untimed(m):
        return m.roundtrip_ms - m.queued_ms - m.host_ms

    extra = median([untimed(s.times["student"]) - untimed(s.times["reference"]) for s in samples])
    allowed = max(slack_ms, fraction * median([s.times["reference"].host_ms for s in samples]))
    if extra > allowed:
        return (f"each call spent {extra:.2f} ms more outside its timed region than the reference's "
                f"({allowed:.2f} ms allowed): work deferred past the call's return, or tampered clocks")
    return None


def peak_review(samples, dtype: str, peak_tflops: float):
    """Faster than the hardware can go means the clocks missed work: flagged for a person to look at."""
    best = max(achieved_tflops(samples, "student", clock) for clock in ("device_ms", "host_ms"))
    if best > peak_tflops:
        return (f"flagged for review: {best:.3g} TFLOP/s is beyond this device's {dtype} peak of "
                f"{peak_tflops:g} TFLOP/s, so some work escaped the clocks")
    return None


def peak_misconfigured(samples, dtype: str, peak_tflops: float):
    reference = achieved_tflops(samples, "reference")
    if reference > peak_tflops:
        return (f"rubric peak_tflops.{dtype} = {peak_tflops:g} is below the reference's own {reference:.0f} "
                "TFLOP/s: set it for this GPU")
    return None


def drift_review(slowdowns: list, tolerance: float):
    """`slowdowns`: per call, the reference's time beside the student's worker over its time alone on the
    same sequence length. Background GPU work from the student's process slows the reference and
    flatters the ratio."""
    slowdown = median(slowdowns) - 1
    if slowdown > tolerance:
        return (f"flagged for review: the reference ran {slowdown:.0%} slower beside your code than alone "
                f"({tolerance:.0%} allowed); does your code keep the device busy between calls?")
    return None
