"""A session as text: one table row per case, then the reasons behind every failure."""
from autograder.record.results import text_table
from gpu_checks.checks import achieved_tflops
from gpu_checks.session import BASELINE, REFERENCE, STUDENT

HEADER = ("case", "pairs", "ratio", "interval", "threshold", "verdict", "TFLOP/s yours", "reference", "sdpa")


def render(session) -> str:
    where = timed_on(session)
    if session.failure:
        return f"Timing {where}: failed. {session.failure}"
    device = next((c.device for c in session.cases if c.device), {})
    clock = "CUDA events" if session.device == "cuda" else "the host clock"
    lines = [f"Timing against the reference {where} ({device.get('device', '?')}, torch {device.get('torch', '?')}, "
             f"session seed {session.seed}): {'passed' if session.passed else 'failed'}",
             "ratio = your time / the reference's, median over interleaved pairs; a case passes when its "
             "interval is within the threshold.",
             f"TFLOP/s: median per call, matmul flops only, by the device clock ({clock}).", ""]
    lines += text_table([HEADER] + [_row(c) for c in session.cases], "<" * len(HEADER))
    reasons = [f"- {c.case.name}: {reason}" for c in session.cases for reason in c.reasons]
    return "\n".join(lines + ([""] + reasons if reasons else []))


def timed_on(session) -> str:
    """The device in words, so that no one takes a CPU verdict for a GPU one."""
    if session.device == "cpu":
        return "on the CPU (not a GPU: CPU-sized configs from the rubric's [parts.timing.cpu])"
    return "on the CUDA GPU"


def _row(result) -> tuple:
    d, samples = result.decision, result.samples
    if d is None:
        return (result.case.name, "-", "-", "-", "-", result.status, "-", "-", "-")
    verdict = result.status + (" (rerun)" if result.rerun else "")
    tflops = (_tflops(samples, role) for role in (STUDENT, REFERENCE, BASELINE))
    return (result.case.name, str(len(samples)), f"{d.median:.2f}", f"[{d.low:.2f}, {d.high:.2f}]",
            f"{result.case.config.threshold:g}", verdict, *tflops)


def _tflops(samples, role) -> str:
    return f"{achieved_tflops(samples, role):.3g}" if role in samples[0].times else "-"
