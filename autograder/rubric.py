"""The rubric file, read once into plain objects."""
from dataclasses import dataclass, field
from pathlib import Path

from autograder import toml
from autograder.paths import REPO, RUBRIC_FILE
PART_KEYS = ("title", "points", "functions", "require_cuda", "device", "builds_on")
PARTS = ("sdpa", "heads", "masks", "mhsa", "block", "timing", "knowledge")
FEEDBACK_LEVELS = ("summary", "name", "full")
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")  # Gradescope's
OUTPUT_FORMATS = ("text", "md")
HELD_SCORES = ("withheld", "earned")  # a held grade's total until a person reviews it: 0, or as earned


@dataclass(frozen=True)
class Limits:
    """What one worker may use ([limits] in the rubric); the worker applies them to itself."""
    call_timeout: float = 10.0
    import_timeout: float = 60.0
    memory_mb: int = 6144
    cpu_seconds: int = 600
    output_bytes: int = 64 * 1024


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    points: float
    functions: tuple
    feedback: str
    require_cuda: bool = False
    device: str = "auto"  # timing: where it runs unless the command line says (context.TIMING_DEVICES)
    builds_on: tuple = ()  # parts whose functions this part's code calls: their failures come first
    settings: dict = field(default_factory=dict)  # the part's other keys (gpu_checks reads timing's)


@dataclass(frozen=True)
class Results:
    """How results are shown ([results] in the rubric): Gradescope's visibility of hidden-test rows,
    one summary row per part, the text format, and a late penalty."""
    hidden_visibility: str = "visible"
    part_rows: bool = True
    output_format: str = "text"
    late_penalty_per_day: float = 0.0   # share of the score taken per day (or part of one) late
    late_days_max: int = 0              # later than this many days scores 0; 0: no limit
    held_score: str = "withheld"        # a grade held for review: "withheld" (0 until released) or "earned"


@dataclass(frozen=True)
class Rubric:
    parts: dict
    suite_weights: dict
    limits: Limits
    submission_timeout: float
    hidden: tuple
    results: Results = Results()

    def part_of(self, function: str) -> list:
        return [p.name for p in self.parts.values() if function in p.functions]


def load(path: Path = RUBRIC_FILE) -> Rubric:
    data = toml.loads(Path(path).read_text())
    feedback = data.get("feedback", {})
    parts = {}
    for name, spec in data["parts"].items():
        if name not in PARTS:
            raise ValueError(f"{path}: unknown rubric part {name!r}; parts are {', '.join(PARTS)}")
        level = feedback.get(name, feedback.get("default", "summary"))
        if level not in FEEDBACK_LEVELS:
            raise ValueError(f"{path}: feedback for {name} must be one of {FEEDBACK_LEVELS}")
        parts[name] = Part(name, spec["title"], float(spec["points"]), tuple(spec.get("functions", ())),
                           level, bool(spec.get("require_cuda", False)), str(spec.get("device", "auto")),
                           tuple(spec.get("builds_on", ())), {k: v for k, v in spec.items() if k not in PART_KEYS})
    for part in parts.values():
        if not set(part.builds_on) <= set(parts):
            raise ValueError(f"{path}: [parts.{part.name}] builds_on names parts that do not exist: {part.builds_on}")
    weights = {k: float(v) for k, v in data["suites"].items()}
    if abs(sum(weights.values()) - 1) > 1e-9:
        raise ValueError(f"{path}: suite shares must add up to 1, got {weights}")
    lim = data.get("limits", {})
    limits = Limits(call_timeout=float(lim.get("call_timeout_s", 10)),
                    import_timeout=float(lim.get("import_timeout_s", 60)),
                    memory_mb=int(lim.get("memory_mb", 6144)), cpu_seconds=int(lim.get("cpu_s", 600)),
                    output_bytes=int(lim.get("output_kb", 64)) * 1024)
    hidden = tuple(REPO / p for p in data.get("isolation", {}).get("hidden", ()))
    return Rubric(parts, weights, limits, float(lim.get("submission_timeout_s", 300)), hidden,
                  _results(data.get("results", {}), path))


def _results(table: dict, path) -> Results:
    shown = Results(str(table.get("hidden_visibility", "visible")), bool(table.get("part_rows", True)),
                    str(table.get("output_format", "text")), float(table.get("late_penalty_per_day", 0.0)),
                    int(table.get("late_days_max", 0)), str(table.get("held_score", "withheld")))
    if shown.hidden_visibility not in VISIBILITIES:
        raise ValueError(f"{path}: [results] hidden_visibility must be one of {', '.join(VISIBILITIES)}")
    if shown.output_format not in OUTPUT_FORMATS:
        raise ValueError(f"{path}: [results] output_format must be one of {', '.join(OUTPUT_FORMATS)}")
    if shown.held_score not in HELD_SCORES:
        raise ValueError(f"{path}: [results] held_score must be one of {', '.join(HELD_SCORES)}")
    if not 0 <= shown.late_penalty_per_day <= 1:
        raise ValueError(f"{path}: [results] late_penalty_per_day is a share of the score, from 0 to 1")
    return shown
