"""The speed verdict as pure functions of per-pair ratios (student time / reference time).

No clocks and no processes here, so every rule is tested on CPU with made-up ratios.
"""
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0  # the same ratios always give the same interval, hence the same verdict


@dataclass(frozen=True)
class Decision:
    verdict: str   # "pass" | "fail" | "undecided"
    median: float  # median of the per-pair ratios
    low: float     # bootstrap interval of that median
    high: float
    basis: str     # "interval", "median" (still straddling after the rerun) or "early"


def pair_ratio(student, reference) -> float:
    """The worse of what the two clocks say. CUDA events time only the caller's stream, so work moved
    to a side stream escapes them; the host clock, which waits for the whole device, does not."""
    return max(student.device_ms / reference.device_ms, student.host_ms / reference.host_ms)


def median_interval(ratios, confidence: float) -> tuple:
    """(median, low, high): a percentile-bootstrap interval of the median."""
    values = np.asarray(ratios, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    resamples = values[rng.integers(0, len(values), size=(BOOTSTRAP_RESAMPLES, len(values)))]
    tail = (1 - confidence) / 2
    low, high = np.quantile(np.median(resamples, axis=1), [tail, 1 - tail])
    return float(np.median(values)), float(low), float(high)


def decide(ratios, threshold: float, confidence: float, final: bool = False) -> Decision:
    """Pass when the whole interval is within the threshold, fail when it is all above; otherwise
    undecided (the caller reruns once), or for the final try the median itself decides."""
    median, low, high = median_interval(ratios, confidence)
    if high <= threshold:
        return Decision("pass", median, low, high, "interval")
    if low > threshold:
        return Decision("fail", median, low, high, "interval")
    if final:
        return Decision("pass" if median <= threshold else "fail", median, low, high, "median")
    return Decision("undecided", median, low, high, "interval")


def early_failure(ratios, threshold: float, factor: float, confidence: float):
    """A fail Decision when the median of the first ratios is over threshold * factor, else None: a loop
    over queries is 10-100x slower, and measuring it to full precision only spends GPU time. The
    median, not the minimum, so that one reference call slowed by a hiccup cannot save it."""
    median, low, high = median_interval(ratios, confidence)
    return Decision("fail", median, low, high, "early") if median > threshold * factor else None


def median(values) -> float:
    return float(np.median(np.asarray(values, dtype=float)))
