"""The timing part's settings, read from rubric.toml's [parts.timing], and the cases they expand to.

Every number lives in the rubric (one place an instructor edits); a missing or unknown key is an
error here rather than a silent default, so a typo cannot loosen the check. The CPU device reads the
same table with its [parts.timing.cpu] keys in place of the CUDA ones (CPU-sized configs, a CPU peak).
"""
from dataclasses import dataclass, fields

from autograder.core.rubric import DTYPES  # the rubric schema's

DEVICES = ("cuda", "cpu")
CPU_TABLE = "cpu"  # [parts.timing.cpu]: the keys that differ when timing on the CPU


@dataclass(frozen=True)
class Config:
    """A family of shapes: each timed pair draws one sequence length from seq_lens."""
    name: str
    batch: int
    seq_lens: tuple
    d_model: int
    num_heads: int
    threshold: float


@dataclass(frozen=True)
class Case:
    """One thing to time: a config in one dtype, forward only or forward and backward."""
    config: Config
    dtype: str
    backward: bool

    @property
    def name(self) -> str:
        return f"{self.config.name} {self.dtype} {'fwd+bwd' if self.backward else 'fwd'}"

    def flops(self, seq_len: int) -> float:
        """Matmul flops: QKV and output projections 8*B*L*d^2, QK^T and PV 4*B*L^2*d; backward is twice
        the forward, hence 3x for fwd+bwd. Softmax and elementwise work are left out, as usual."""
        B, L, d = self.config.batch, seq_len, self.config.d_model
        forward = 8 * B * L * d * d + 4 * B * L * L * d
        return 3.0 * forward if self.backward else float(forward)


@dataclass(frozen=True)
class TimingSettings:
    configs: tuple
    dtypes: tuple
    pairs: int
    early_pairs: int
    early_fail_factor: float
    rerun_pairs: int
    warmup_pairs: int
    check_calls: int
    confidence: float
    call_timeout_s: float
    rtol: dict
    peak_tflops: dict
    out_of_band_slack_ms: float
    out_of_band_fraction: float
    drift_tolerance: float
    solo_calls: int

    @classmethod
    def for_device(cls, table: dict, device: str) -> "TimingSettings":
        """From the [parts.timing] keys (rubric.Part.settings), for "cuda" or "cpu"."""
        if device not in DEVICES:
            raise ValueError(f"the timing device must be one of {DEVICES}, got {device!r}")
        overrides = table.get(CPU_TABLE)
        if device == "cpu" and not overrides:
            raise ValueError("rubric [parts.timing]: timing on the CPU needs a [parts.timing.cpu] table with "
                             "CPU-sized configs")
        base = {k: v for k, v in table.items() if k != CPU_TABLE}
        if device == "cpu":
            unknown = set(overrides) - set(base)
            if unknown:
                raise ValueError(f"rubric [parts.timing.cpu]: unknown keys {sorted(unknown)}")
            base.update(overrides)
        return cls.from_table(base)

    @classmethod
    def from_table(cls, table: dict) -> "TimingSettings":
        """From a flat table of every key (no [parts.timing.cpu])."""
        expected = {f.name for f in fields(cls)}
        missing, unknown = expected - set(table), set(table) - expected
        if missing or unknown:
            raise ValueError(f"rubric [parts.timing]: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
        configs = tuple(Config(name, int(c["batch"]), tuple(int(n) for n in c["seq_lens"]), int(c["d_model"]),
                               int(c["num_heads"]), float(c["threshold"])) for name, c in table["configs"].items())
        dtypes = tuple(table["dtypes"])
        if not set(dtypes) <= set(DTYPES) or not configs:
            raise ValueError(f"rubric [parts.timing]: dtypes must be among {DTYPES} and configs not empty")
        if not (0 < table["early_pairs"] <= table["pairs"] < table["rerun_pairs"] and 0 < table["confidence"] < 1
                and table["solo_calls"] > 0):
            raise ValueError("rubric [parts.timing]: needs 0 < early_pairs <= pairs < rerun_pairs, "
                             "0 < confidence < 1 and solo_calls > 0")
        scalars = {f.name: f.type(table[f.name]) for f in fields(cls) if f.type in (int, float)}
        return cls(**scalars, configs=configs, dtypes=dtypes, rtol=_per_dtype(table, "rtol", dtypes),
                   peak_tflops=_per_dtype(table, "peak_tflops", dtypes))

    def cases(self) -> list:
        """Launch-bound configs come first in the rubric, so the cheapest catch of a slow loop runs first."""
        return [Case(config, dtype, backward) for config in self.configs for dtype in self.dtypes
                for backward in (False, True)]


def _per_dtype(table: dict, key: str, dtypes: tuple) -> dict:
    values = {k: float(v) for k, v in table[key].items()}
    if not set(dtypes) <= set(values):
        raise ValueError(f"rubric [parts.timing]: {key} needs a value for each of {dtypes}")
    return values
