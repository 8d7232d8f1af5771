"""The rubric file, checked against its declared schema and read once into plain objects.

SCHEMA below declares every key of rubric.toml: its kind, its default, what it means and what it
may be. The loader refuses an unknown table or key, a value of the wrong kind or out of range, with
the file and the key named, so that an instructor's typo is never silently ignored.
`python -m autograder rubric --describe` prints the schema; docs/rubric.md is generated from it
(`release --check` fails when it is stale). Standard library only: every route reads the rubric
before anything heavy is imported.
"""
import re
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from autograder.core import toml
from autograder.core.paths import REPO, RUBRIC_FILE

# The parts a stage of the grader scores (grade_timing, grade_knowledge), each with keys of its own.
# Every other [parts.NAME] table is a part of the assignment, graded by the test suites: its name
# tags tests (@pytest.mark.part("NAME")) and results, and its `functions` are what students write.
STAGE_PARTS = ("timing", "knowledge")
# A part's name: a pytest marker's argument, a CSV column, and inside a notebook's test cell ids
# (test_NAME_public_1, read back by autograder/intake/notebook.py), so no "_" in it.
PART_NAME = re.compile(r"[a-z][a-z0-9]*\Z")
FEEDBACK_LEVELS = ("summary", "name", "full")
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")  # Gradescope's
OUTPUT_FORMATS = ("text", "md")
HELD_SCORES = ("withheld", "earned")  # a held grade's total until a person reviews it: 0, or as earned
TIMING_DEVICES = ("auto", "cuda", "cpu")
PER_QUESTION = "per_question"  # [parts.knowledge] knowledge_feedback: each question scored and shown always


class RubricError(ValueError):
    """A rubric file that does not follow the schema; the message names the file and the key."""


class _Required:
    def __repr__(self) -> str:
        return "required"


REQUIRED = _Required()  # the default of a key that has none: the file must give it


# ------------------------------------------------------------------------------------------------
# The schema
# ------------------------------------------------------------------------------------------------

def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# kind -> whether a TOML value is of that kind
KINDS = {
    "string": lambda v: isinstance(v, str),
    "number": _is_number,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "list of strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "list of integers": lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
    "date or date-time": lambda v: isinstance(v, date),  # a TOML date-time is a datetime, a date's subclass
    "table of numbers": lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()),
    "table": lambda v: isinstance(v, dict),               # checked as the Table its key names
    "tables": lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()),  # each one so
}


@dataclass(frozen=True)
class Key:
    """One key of a rubric table."""
    name: str
    kind: str                # one of KINDS
    default: object          # REQUIRED when the file must give it; None: absent means "not set"
    description: str
    choices: tuple = ()      # the values allowed (for a list, of each item)
    low: float | None = None     # a number's inclusive bounds (for a list or a table, of each value)
    high: float | None = None
    table: str = ""          # kinds "table" and "tables": the Table (of SCHEMA) each one follows

    def problem(self, value) -> str | None:
        """What is wrong with `value` for this key (None: nothing); a table's own keys are checked
        against its Table."""
        if not KINDS[self.kind](value):
            return f"must be {'an' if self.kind[0] in 'aeiou' else 'a'} {self.kind}, got {value!r} ({_toml_kind(value)})"
        items = list(value) if isinstance(value, (list, dict)) else [value]  # a table's keys: the choices
        wrong = [v for v in items if self.choices and v not in self.choices]
        if wrong:
            return (f"must be {'among' if isinstance(value, (list, dict)) else 'one of'} "
                    f"{', '.join(map(str, self.choices))}; got {wrong[0]!r}")
        numbers = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
        if any((self.low is not None and v < self.low) or (self.high is not None and v > self.high)
               for v in numbers if _is_number(v)):
            return f"must {'hold values' if isinstance(value, (list, dict)) else 'be'} {self._range()}, got {value!r}"
        return None

    def allowed(self) -> str:
        """What the key may hold, for the schema's page."""
        choices = ", ".join(f"`{c}`" for c in self.choices)
        if self.kind == "table of numbers":
            return f"keys {choices}; values {self._range()}"
        return choices or self._range()

    def _range(self) -> str:
        if self.low is not None and self.high is not None:
            return f"from {self.low:g} to {self.high:g}"
        return f"at least {self.low:g}" if self.low is not None else ""


@dataclass(frozen=True)
class Table:
    """One table of rubric.toml and the keys it may hold."""
    name: str                # as written in the file: "results", "parts.timing"
    description: str
    keys: tuple

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name == name)


def _part_keys(functions=REQUIRED) -> tuple:
    return (
        Key("title", "string", REQUIRED, "the part's name as students read it in every result"),
        Key("points", "number", REQUIRED, "the part's points", low=0),
        Key("functions", "list of strings", functions,
            "the functions and classes of reference/mhsa.py this part grades (each with a solution region, "
            "which the stubs leave for students to write): a forbidden API found in one zeroes this part"),
        Key("builds_on", "list of strings", [],
            "parts whose functions this part's code calls: when they fail, this part's failed tests run again with "
            "correct versions of theirs ([results] carry_forward)"),
    )


ENABLED = ("boolean", True)  # an optional part's switch (the stage that grades it runs only when true)
DTYPES = ("float32", "bfloat16")

# The timing check's settings: gpu_checks/settings.py reads them (and checks how they relate to one
# another); docs/gpu-checks.md says how each was chosen.
TIMING_SETTINGS = (
    Key("dtypes", "list of strings", REQUIRED, "the dtypes timed (float32 runs with TF32 pinned off)", choices=DTYPES),
    Key("pairs", "integer", REQUIRED, "interleaved (student, reference) pairs timed per case", low=1),
    Key("early_pairs", "integer", REQUIRED, "the first pairs, whose median over threshold * early_fail_factor "
        "fails the case early", low=1),
    Key("early_fail_factor", "number", REQUIRED, "see early_pairs", low=1),
    Key("rerun_pairs", "integer", REQUIRED, "one rerun's pairs, when the interval straddles the threshold "
        "(then the median decides)", low=1),
    Key("warmup_pairs", "integer", REQUIRED, "pairs run and discarded before timing", low=0),
    Key("check_calls", "integer", REQUIRED, "correctness gate on fresh inputs before anything is timed", low=0),
    Key("confidence", "number", REQUIRED, "of the bootstrap interval of the median ratio", low=0, high=1),
    Key("call_timeout_s", "number", REQUIRED, "seconds of one request to a timing worker (building a module, "
        "one call)", low=0.1),
    Key("rtol", "table of numbers", REQUIRED, "relative L2 error allowed against the reference per call, per "
        "dtype", choices=DTYPES, low=0),
    Key("peak_tflops", "table of numbers", REQUIRED, "the device's dense peak per dtype: a faster result is "
        "flagged for review; set it for your GPU", choices=DTYPES, low=0),
    Key("out_of_band_slack_ms", "number", REQUIRED, "time per call spent outside the timed region beyond the "
        "reference's: a failure over max(slack, out_of_band_fraction * reference time)", low=0),
    Key("out_of_band_fraction", "number", REQUIRED, "see out_of_band_slack_ms", low=0),
    Key("drift_tolerance", "number", REQUIRED, "the reference slower beside the submission than alone by more "
        "than this share: flagged for review", low=0),
    Key("solo_calls", "integer", REQUIRED, "reference calls timed alone, after the submission's worker is gone", low=1),
    Key("configs", "tables", REQUIRED, "the shapes timed, one table `configs.NAME` each (below); launch-bound "
        "ones first, so that the cheapest catch of a slow loop runs first",
        table="parts.timing.configs.NAME"),
)
TIMING_CONFIG = (
    Key("batch", "integer", REQUIRED, "batch size", low=1),
    Key("seq_lens", "list of integers", REQUIRED, "sequence lengths: each timed pair draws one", low=1),
    Key("d_model", "integer", REQUIRED, "model width", low=1),
    Key("num_heads", "integer", REQUIRED, "heads (d_model must be a multiple)", low=1),
    Key("threshold", "number", REQUIRED, "pass when the student's time is at most this times the reference's", low=1),
)

CODE_PART = "parts.NAME"  # the schema's table of a part graded by the test suites, whatever its name
PART_FEEDBACK = "PART"     # the schema's [feedback] key that stands for each part's own
SCHEMA = (
    Table(CODE_PART, "A part of the assignment, graded by the test suites: the tests marked "
          "`@pytest.mark.part(\"NAME\")` (NAME: lower case letters and digits). Its functions come from "
          "reference/mhsa.py, whose stubs, notebook cells and points table `release --write` makes; the parts "
          "are listed in the order students meet them. A rubric without the table does not grade the part; to "
          "drop it from the course, take out its functions and tests too (docs/authoring.md).",
          _part_keys()),
    Table("parts.timing", "Speed of MultiHeadSelfAttention against the reference (gpu_checks/), graded by "
          "the `grade_timing` stage.", (
              *_part_keys(functions=[]),
              Key("enabled", *ENABLED, "false: timing is not graded at all (no row, not in the maximum); its "
                  "settings stay for later"),
              Key("require_cuda", "boolean", False, "without a CUDA device the part scores 0 with the reason, "
                  "instead of being left out of the maximum (AUTOGRADER_REQUIRE_CUDA=1 does the same)"),
              Key("device", "string", "auto", "where the part runs unless `grade --timing-device` says: `auto` "
                  "(CUDA when present, else not graded), `cuda`, or `cpu` (the [parts.timing.cpu] configs)",
                  choices=TIMING_DEVICES),
              *TIMING_SETTINGS,
              Key("cpu", "table", None, "[parts.timing.cpu] (below): the settings that differ when timing on the CPU",
                  table="parts.timing.cpu"))),
    Table("parts.timing.configs.NAME", "One family of shapes timed on CUDA (NAME: e.g. `launch`, `throughput`).",
          TIMING_CONFIG),
    Table("parts.timing.cpu", "Timing on the CPU (`--timing-device cpu`, `device = \"cpu\"`): the same procedure "
          "with these keys in place of [parts.timing]'s; each unset one is [parts.timing]'s. Needed to time on "
          "the CPU.", tuple(replace(k, default=None, table=k.table.replace("timing.", "timing.cpu."))
                            for k in TIMING_SETTINGS)),
    Table("parts.timing.cpu.configs.NAME", "One family of shapes timed on the CPU (CPU-sized).", TIMING_CONFIG),
    Table("parts.knowledge", "The knowledge check (course/notebook/knowledge.toml), graded by the "
          "`grade_knowledge` stage. Withheld (the form of answers only, no score) until the deadline: "
          "Gradescope's late due date (else its due date) on Gradescope, `grade --due` where given, else `due`.", (
              *_part_keys(functions=[]),
              Key("enabled", *ENABLED, "false: the knowledge check is not graded at all (no row, not in the maximum)"),
              Key("due", "date or date-time", None, "the deadline where no platform gives one (Gradescope's own "
                  "dates replace it): from this moment each question's result is given and the part is scored "
                  "(set it to the last moment any submission is accepted, late ones included; a date means the "
                  "end of that day, a date-time without offset the grading machine's time zone); unset: a batch "
                  "and nbgrader's gradebook grade collected work and score it, `grade` and Gradescope without "
                  "dates withhold it (`grade --after-due-date` scores it)"),
              Key("knowledge_feedback", "string", None, "`per_question` scores and shows each question always: "
                  "only for grading after the deadline, since any score shown before it, a total included, lets "
                  "a student find the key by resubmitting; unset: decided by `due`", choices=(PER_QUESTION,)))),
    Table("suites", "How each part's points are shared between the test suites that cover it. A suite that "
          "is not run (`grade --suite public`) leaves the other's share as the whole. The shares add up to 1.", (
              Key("public", "number", 0.3, "tests_public/'s share", low=0, high=1),
              Key("hidden", "number", 0.7, "tests_hidden/'s share", low=0, high=1))),
    Table("feedback", "What a student sees of a failed hidden test, per part: `summary` (test name, part, the "
          "smallest failing case, what went wrong, the likely misconception; never the test source or the "
          "expected tensors), `name` (test name and part only) or `full` (everything, as for public tests).", (
              Key("default", "string", "summary", "the level of every part not named here", choices=FEEDBACK_LEVELS),
              Key(PART_FEEDBACK, "string", None, "the level for one part, the key named as the part (`sdpa = "
                  "\"full\"`); unset: `default`", choices=FEEDBACK_LEVELS),
              Key("diagnosis", "boolean", True, "false: the `diagnose` stage does not run, and no likely "
                  "misconception is named in any feedback"),
              Key("pictures", "boolean", True, "false: the `draw_pictures` stage does not run, and no failed "
                  "part shows its attention weights beside the expected ones"))),
    Table("results", "How results are shown and adjusted (every route writes the same results; Gradescope "
          "reads the visibility and format).", (
              Key("hidden_visibility", "string", "visible", "Gradescope's visibility of hidden-test rows and of the "
                  "part rows that reveal them", choices=VISIBILITIES),
              Key("part_rows", "boolean", True, "one summary row per part (no points of its own: the rows add up)"),
              Key("output_format", "string", "text", "`md`: Gradescope renders the messages as Markdown",
                  choices=OUTPUT_FORMATS),
              Key("late_penalty_per_day", "number", 0.0, "share of the score taken per day (or part of one) late "
                  "(Gradescope's submission_metadata.json, or `grade --days-late`); 0 and late_days_max 0: no "
                  "late policy, the `apply_late_penalty` stage does not run", low=0, high=1),
              Key("late_days_max", "integer", 0, "later than this many days scores 0; 0: no limit", low=0),
              Key("held_score", "string", "withheld", "a grade held for a person (`python -m autograder review`): "
                  "`withheld` shows its total as 0 until released, `earned` the score the tests earned meanwhile; "
                  "either way every view says it is held", choices=HELD_SCORES),
              Key("carry_forward", "boolean", True, "error carried forward: when a part fails, the failed tests of "
                  "the parts built on it (`builds_on`, followed through) run once more with correct versions of "
                  "its functions in place of the student's, and those that pass then keep their points, so a bug "
                  "is charged once, in the part that holds it; false: every test is graded with the student's "
                  "own functions throughout (the `carry_forward` stage does not run)"))),
    Table("limits", "What one worker may use, and one whole grade.", (
        Key("call_timeout_s", "number", 10, "seconds one call into student code may take", low=0.1),
        Key("import_timeout_s", "number", 60, "seconds importing the submission may take (torch included)", low=1),
        Key("memory_mb", "integer", 6144, "address space of the worker, MiB", low=256),
        Key("cpu_s", "integer", 600, "CPU seconds of one worker", low=1),
        Key("output_kb", "integer", 64, "printed output kept per worker, KiB", low=1),
        Key("submission_timeout_s", "number", 300, "seconds for a whole grade, on every route", low=1))),
    Table("isolation", "What student code must never read.", (
        Key("hidden", "list of strings", ["reference", "tests_hidden", "rubric.toml", "course/source",
                                          "course/gradebook.db", "course/autograded", "course/submitted",
                                          "course/feedback", "course/notebook"],
            "paths, relative to the repository, that the sandbox replaces with empty ones and the process "
            "level denies in its audit hook (results and batch folders are added by the command that grades)"),)),
)
TABLES = {t.name: t for t in SCHEMA}
# Tables written on their own in the file; the others are the value of a key of one of these (Key.table).
TOP_TABLES = {t.name: t for t in SCHEMA if t.name not in {k.table for t in SCHEMA for k in t.keys}}


def default(table: str, key: str):
    return TABLES[table].key(key).default


def _toml_kind(value) -> str:
    return {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


# ------------------------------------------------------------------------------------------------
# The objects the grader reads
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """What one worker may use ([limits] in the rubric); the worker applies them to itself."""
    call_timeout: float = float(default("limits", "call_timeout_s"))
    import_timeout: float = float(default("limits", "import_timeout_s"))
    memory_mb: int = default("limits", "memory_mb")
    cpu_seconds: int = default("limits", "cpu_s")
    output_bytes: int = default("limits", "output_kb") * 1024


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    points: float
    functions: tuple
    feedback: str
    require_cuda: bool = False
    device: str = "auto"  # timing: where it runs unless the command line says
    builds_on: tuple = ()  # parts whose functions this part's code calls: their failures come first
    settings: dict = field(default_factory=dict)  # the part's other keys (gpu_checks reads timing's)


@dataclass(frozen=True)
class Results:
    """How results are shown ([results] in the rubric)."""
    hidden_visibility: str = default("results", "hidden_visibility")
    part_rows: bool = default("results", "part_rows")
    output_format: str = default("results", "output_format")
    late_penalty_per_day: float = default("results", "late_penalty_per_day")
    late_days_max: int = default("results", "late_days_max")
    held_score: str = default("results", "held_score")
    carry_forward: bool = default("results", "carry_forward")


@dataclass(frozen=True)
class Rubric:
    parts: dict              # the parts graded, in the contract's order (a disabled part is left out)
    suite_weights: dict
    limits: Limits
    submission_timeout: float
    hidden: tuple
    results: Results = Results()
    diagnosis: bool = True   # [feedback] diagnosis: whether the diagnose stage runs
    pictures: bool = True    # [feedback] pictures: whether the draw_pictures stage runs
    source: Path = RUBRIC_FILE  # the file read: hidden from the worker like rubric.toml, wherever it is

    def part_of(self, function: str) -> list:
        """The parts that grade `function`: its code part, and timing where timing times it."""
        return [p.name for p in self.parts.values() if function in p.functions]

    @property
    def code_parts(self) -> dict:
        """The parts the test suites grade (every part but STAGE_PARTS), in the rubric's order."""
        return {name: part for name, part in self.parts.items() if name not in STAGE_PARTS}

    @property
    def contract(self) -> tuple:
        """Every function and class the parts grade, in order: what the stub leaves for students to write."""
        return tuple(dict.fromkeys(f for p in self.code_parts.values() for f in p.functions))


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------

def load(path: Path = RUBRIC_FILE) -> Rubric:
    """The rubric at `path`, checked against SCHEMA; RubricError (a ValueError) names the file and
    the key of anything wrong."""
    try:
        data = toml.loads(Path(path).read_text())
    except OSError as err:
        raise RubricError(f"{path}: cannot read the rubric ({err.strerror or err})") from None
    except ValueError as err:  # tomllib.TOMLDecodeError
        raise RubricError(f"{path}: not valid TOML: {err}") from None
    tables = _checked(data, path)
    feedback = tables["feedback"]
    parts = {}
    for name, spec in tables.items():  # the parts in the file's order
        if not name.startswith("parts.") or not spec.pop("enabled", True):
            continue
        name = name.removeprefix("parts.")
        given = {k: spec.pop(k) for k in ("title", "points", "functions", "builds_on")}
        parts[name] = Part(name, given["title"], float(given["points"]), tuple(given["functions"]),
                           feedback.get(name, feedback["default"]), spec.pop("require_cuda", False),
                           spec.pop("device", "auto"), tuple(given["builds_on"]), spec)
    for part in parts.values():
        missing = [p for p in part.builds_on if p not in parts or p in STAGE_PARTS]
        if missing:
            raise RubricError(f"{path}: [parts.{part.name}] builds_on names parts that are not graded by the "
                              f"test suites: {', '.join(missing)}")
        if part.name not in STAGE_PARTS and not part.functions:
            raise RubricError(f"{path}: [parts.{part.name}] functions is empty: name the functions and classes "
                              "this part grades")
        odd = [f for f in part.functions if not f.isidentifier()]
        if odd:
            raise RubricError(f"{path}: [parts.{part.name}] functions: {odd[0]!r} is not a Python name")
    weights = {k: float(v) for k, v in tables["suites"].items()}
    if abs(sum(weights.values()) - 1) > 1e-9:
        raise RubricError(f"{path}: [suites] shares must add up to 1, got {weights}")
    lim = tables["limits"]
    limits = Limits(call_timeout=float(lim["call_timeout_s"]), import_timeout=float(lim["import_timeout_s"]),
                    memory_mb=lim["memory_mb"], cpu_seconds=lim["cpu_s"], output_bytes=lim["output_kb"] * 1024)
    hidden = tuple(REPO / p for p in tables["isolation"]["hidden"])
    shown = tables["results"]
    return Rubric(parts, weights, limits, float(lim["submission_timeout_s"]), hidden,
                  Results(**{k: (float(v) if k == "late_penalty_per_day" else v) for k, v in shown.items()}),
                  feedback["diagnosis"], feedback["pictures"], Path(path).resolve())


def _checked(data: dict, path) -> dict:
    """table name -> {key: value} for every top-level table of the schema that applies (the parts the
    file holds, in its order, then every other table), defaults filled in. Raises RubricError on the
    first thing wrong."""
    parts = data.get("parts")
    if not isinstance(parts, dict) or not parts:
        raise RubricError(f"{path}: no [parts.NAME] table: a rubric grades at least one part")
    for name in parts:
        if not PART_NAME.match(name):
            raise RubricError(f"{path}: part name [parts.{name}] must be lower case letters and digits, "
                              "starting with a letter")
    for name in data:
        if name != "parts" and (name not in TOP_TABLES or name.startswith("parts.")):
            others = [n for n in TOP_TABLES if not n.startswith("parts.")]
            raise RubricError(f"{path}: unknown table [{name}]{_did_you_mean(name, others)}; "
                              f"tables are parts.NAME, {', '.join(others)}")
    checked = {f"parts.{name}": _table(TOP_TABLES.get(f"parts.{name}") if name in STAGE_PARTS
                                       else TOP_TABLES[CODE_PART], spec, f"parts.{name}", path)
               for name, spec in parts.items()}
    feedback = _feedback_table(list(parts))
    return checked | {name: _table(feedback if name == "feedback" else table, data.get(name, {}), name, path)
                      for name, table in TOP_TABLES.items() if not name.startswith("parts.")}


def _feedback_table(parts: list) -> Table:
    """[feedback] as the schema says, its PART key made one key per part of the file."""
    table = TABLES["feedback"]
    each = table.key(PART_FEEDBACK)
    keys = [k for k in table.keys if k.name != PART_FEEDBACK]
    return replace(table, keys=(*keys, *(replace(each, name=name, description=f"the level for part {name}")
                                        for name in parts if name not in {k.name for k in keys})))


def _table(table: Table, given, where: str, path) -> dict:
    """`given` (the file's [where]) checked against `table`: {key: value}, defaults filled in, a key
    that is unset and has no default left out."""
    if not isinstance(given, dict):
        raise RubricError(f"{path}: {where} must be a table ([{where}]), got {given!r}")
    known = [k.name for k in table.keys]
    unknown = [k for k in given if k not in known]
    if unknown:
        raise RubricError(f"{path}: [{where}] unknown key {unknown[0]!r}{_did_you_mean(unknown[0], known)}; "
                          f"its keys are {', '.join(known)} (python -m autograder rubric --describe)")
    values = {}
    for key in table.keys:
        if key.name not in given:
            if key.default is REQUIRED:
                raise RubricError(f"{path}: [{where}] needs {key.name!r} ({key.description})")
            if key.default is not None:
                values[key.name] = list(key.default) if isinstance(key.default, list) else key.default
            continue
        value = given[key.name]
        problem = key.problem(value)
        if problem:
            raise RubricError(f"{path}: [{where}] {key.name} {problem}")
        if key.kind == "table":
            value = _table(TABLES[key.table], value, f"{where}.{key.name}", path)
        elif key.kind == "tables":
            value = {name: _table(TABLES[key.table], each, f"{where}.{key.name}.{name}", path)
                     for name, each in value.items()}
        values[key.name] = value
    return values


def _did_you_mean(name: str, known) -> str:
    import difflib  # only when something is wrong: the rubric is read on every route's start-up

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ------------------------------------------------------------------------------------------------
# The schema as a page
# ------------------------------------------------------------------------------------------------

def describe() -> str:
    """Every table and key of the schema as Markdown: docs/rubric.md, and `rubric --describe`."""
    lines = ["# rubric.toml", "",
             "<!-- Generated from autograder/core/rubric.py's SCHEMA by `python -m autograder release --write`; "
             "`release --check` fails when it is stale. -->", "",
             "The one file an instructor edits to change points, feedback, limits and which stages run. "
             "Every key is checked when the rubric is read: an unknown table or key, a value of the wrong "
             "kind or out of range stops the grader with a message that names the file and the key. "
             "`python -m autograder rubric FILE` checks a rubric without grading anything; "
             "`grade --rubric FILE` grades with it (a batch's graders too).", ""]
    for table in SCHEMA:
        lines += [f"## [{table.name}]", "", table.description, "",
                  "| key | kind | default | allowed | meaning |", "| --- | --- | --- | --- | --- |"]
        for key in table.keys:
            lines.append(f"| `{key.name}` | {key.kind} | {_shown_default(key.default)} | {key.allowed()} | "
                         f"{key.description} |")
        lines.append("")
    return "\n".join(lines)


def _shown_default(value) -> str:
    if value is REQUIRED:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
    return f"`{value:g}`"
