"""The knowledge check: its questions, the answer key, answers read without running anything, grading.

Questions live in course/notebook/knowledge.toml (instructor side); the key in
tests_hidden/knowledge_key.toml, which is never released. Students answer either in the notebook
or in assignment/knowledge.py (generated here); both routes are read the same way: the literal
values assigned to Q<n>_ANSWER, through ast.literal_eval, so no student code ever runs.

Feedback: any feedback that depends on whether answers are right, a total included, lets a student
find the key by resubmitting (changing one answer at a time and watching the total: 19 resubmissions
did it). So until the deadline the knowledge check is WITHHELD: its score is not given (the part is
"not graded" in every result, its points not in the score) and the feedback says only what is
wrong with the form of an answer (not answered, not a literal, the wrong kind of value), which the
key does not decide. The deadline is the last moment any submission is accepted, taken from the
platform where it has one (Gradescope's late due date, else its due date: autograder/runners/gradescope.py),
else from rubric.toml's [parts.knowledge] `due`; from it each question's result is given, and a
regrade then scores the part (`with_deadline`). Without any deadline, work graded where students can
still resubmit against the feedback (`grade`, Gradescope) keeps it withheld, and collected work (a
batch, the gradebook: `grade --after-due-date`) is scored. `knowledge_feedback = "per_question"`
gives each question's result always: for grading after the deadline only.
"""
import ast
import json
import re
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timezone
from pathlib import Path

from autograder.core import toml
from autograder.core.errors import clean_text
from autograder.core.paths import KNOWLEDGE_KEY, KNOWLEDGE_QUESTIONS
from autograder.core.rubric import PER_QUESTION

QUESTIONS_FILE = KNOWLEDGE_QUESTIONS
KEY_FILE = KNOWLEDGE_KEY
ANSWER_NAME = re.compile(r"^Q\d+_ANSWER$")
ANSWER_LINE = re.compile(r"^Q\d+_ANSWER\s*(?::[^=]*)?=")  # an answer on a line of its own
# The student release has no course/ folder: `check` reads the questions from this copy, written
# by `release` (autograder/authoring/release.py) so that it can say what is wrong with the form of an answer.
RELEASED_QUESTIONS = Path(__file__).with_name("knowledge_questions.json")

# What a well-formed answer of each kind is, and when it is correct: one Python expression each over
# the answer variable `{v}` and the key `{key}`. The notebook's test cells run exactly these
# expressions in the student's kernel and `grade` evaluates them here, so both routes agree.
WRONG = "not the right answer"
FORM = {
    "choice": "isinstance({v}, str) and {v}.strip().lower() in {choices}",
    "truefalse": "isinstance({v}, bool)",
    "number": "isinstance({v}, (int, float)) and not isinstance({v}, bool)",
}
CORRECT = {
    "choice": "{v}.strip().lower() == {key}",
    "truefalse": "{v} is {key}",
    "number": "abs({v} - {key}) <= 1e-9 * max(1.0, abs({key}))",
}


@dataclass(frozen=True)
class Question:
    id: str                 # Q<n>: autograded; W<n>: written, graded by hand in nbgrader
    kind: str
    text: str
    choices: dict = field(default_factory=dict)
    points: float = 0.0     # written questions only: autograded ones share the rubric's points
    guide: str = ""         # written questions only: the marking guide for graders

    @property
    def variable(self) -> str:
        return f"{self.id}_ANSWER"

    @property
    def autograded(self) -> bool:
        return self.kind != "written"

    def _fill(self, template: str, key=None) -> str:
        return template.format(v=self.variable, key=repr(key), choices=repr(tuple(self.choices)))

    def form_check(self) -> str:
        return self._fill(FORM[self.kind])

    def correct_check(self, key) -> str:
        return self._fill(CORRECT[self.kind], key)

    def how_to_answer(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(f'"{c}"' for c in self.choices) + " (a string)"
        return {"truefalse": "True or False", "number": "a number"}[self.kind]


@dataclass(frozen=True)
class Unreadable:
    """An answer assigned something other than a literal (a call, a name): it scores 0."""
    source: str


def questions(path: Path = QUESTIONS_FILE) -> list:
    if not Path(path).is_file() and RELEASED_QUESTIONS.is_file():  # the student release: no course/
        data = {"question": json.loads(RELEASED_QUESTIONS.read_text())}
    else:
        data = toml.loads(Path(path).read_text())
    found = [Question(**q) for q in data["question"]]
    kinds = set(FORM) | {"written"}
    for q in found:
        if q.kind not in kinds:
            raise ValueError(f"{path}: question {q.id} has kind {q.kind!r}; kinds are {sorted(kinds)}")
        if q.autograded != bool(ANSWER_NAME.match(q.variable)):
            raise ValueError(f"{path}: autograded questions are named Q<n>, written ones W<n>; got {q.id}")
    return found


def released_questions(all_questions: list) -> str:
    """RELEASED_QUESTIONS' text: the questions without their marking guides, which are for graders."""
    return json.dumps([{k: v for k, v in asdict(q).items() if k != "guide"} for q in all_questions], indent=1) + "\n"


def autograded(all_questions: list) -> list:
    return [q for q in all_questions if q.autograded]


def hand_graded(rubric, path: Path = QUESTIONS_FILE) -> list:
    """The written questions a person scores (those with points), where the rubric has a knowledge check:
    they come with it, or not at all (nbgrader's notebook, `review --score`, the class report)."""
    return [q for q in questions(path) if not q.autograded and q.points] if "knowledge" in rubric.parts else []


def load_key(path: Path = KEY_FILE) -> dict:
    if not Path(path).is_file():
        raise FileNotFoundError(f"the knowledge-check key {path} is missing (it is never released to "
                                "students: grade the knowledge check on the instructor's repository)")
    return toml.loads(Path(path).read_text())


def read_answers(source: str) -> dict:
    """Q<n>_ANSWER -> value for every top-level assignment in `source`; the last one wins, as when run."""
    answers = {}
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and ANSWER_NAME.match(target.id):
                try:
                    answers[target.id] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    answers[target.id] = Unreadable(ast.get_source_segment(source, node.value) or "?")
    return answers


def read_answers_leniently(source: str) -> tuple:
    """(answers, problem): read_answers(source), or, when `source` does not parse as a whole, the
    answers on lines of their own (`Q3_ANSWER = "b"`), each read alone, and what is wrong with the
    file. One slip in knowledge.py should not cost the answers that are fine; nothing is run either way."""
    try:
        return read_answers(source), ""
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        where = f" at line {err.lineno}" if isinstance(err, SyntaxError) and err.lineno else ""
        why = err.msg if isinstance(err, SyntaxError) else type(err).__name__
        answers = {}
        for line in source.splitlines():
            if ANSWER_LINE.match(line):
                try:
                    answers |= read_answers(line)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
        return answers, (f"is not valid Python ({clean_text(why, 200)}{where}): only the answers on lines of "
                         f"their own were read ({len(answers)} found)")


def check(question: Question, key, answer) -> tuple:
    """(passed, message for the student); the message never gives the key away."""
    problem = form_problem(question, answer)
    if problem:
        return False, problem
    if not eval(question.correct_check(key), _scope(question, answer)):  # noqa: S307
        return False, f"{question.id}: {WRONG}"
    return True, f"{question.id}: correct"


def form_problem(question: Question, answer) -> str | None:
    """What is wrong with the form of an answer (None when it is a value of the right kind): what
    `check` on a student's machine can say without the key."""
    if answer is None:
        return f"{question.id}: not answered ({question.variable} is None)"
    if isinstance(answer, Unreadable):
        folded = _folded(answer.source)
        fix = (f"write {folded!r}" if folded is not None and question.kind == "number"
               else f"answer with {question.how_to_answer()}")
        return f"{question.id}: {question.variable} = {answer.source[:60]} is not a literal value: {fix}"
    if not eval(question.form_check(), _scope(question, answer)):  # noqa: S307
        return f"{question.id}: answer with {question.how_to_answer()}"
    return None


def _scope(question: Question, answer) -> dict:
    # Only literals reach eval (see read_answers), and the expressions are the module's own.
    return {"__builtins__": {"isinstance": isinstance, "str": str, "bool": bool, "int": int,
                             "float": float, "abs": abs, "max": max}, question.variable: answer}


_ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b}


def _folded(source: str):
    """The number an arithmetic expression of number literals comes to (64 // 8 -> 8), for the
    message; None for anything else. Nothing is run: the tree is walked here, + - * / // only."""
    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and abs(node.value) < 1e12:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            return _ARITHMETIC[type(node.op)](value(node.left), value(node.right))
        raise ValueError("not arithmetic on numbers")

    try:
        return value(ast.parse(source, mode="eval").body)
    except (ValueError, TypeError, SyntaxError, ZeroDivisionError, RecursionError, OverflowError):
        return None


WITHHELD = "withheld"
RUBRIC_DUE = "rubric.toml [parts.knowledge] due"  # where the deadline comes from when no platform gives one


def feedback_mode(settings: dict, now: datetime | None = None) -> str:
    """WITHHELD or PER_QUESTION, from the rubric's [parts.knowledge] settings (see the module's doc),
    which rubric.load has checked against the schema: knowledge_feedback is PER_QUESTION or unset, due
    a date, a date-time or unset."""
    if settings.get("knowledge_feedback") == PER_QUESTION:
        return PER_QUESTION
    due = deadline(settings)
    return PER_QUESTION if due is not None and (now or datetime.now(timezone.utc)) >= due else WITHHELD


def deadline(settings: dict) -> datetime | None:
    """The moment of the knowledge settings' `due`, time-zone aware: a bare date means the end of that
    day, a date-time without offset the grading machine's time zone."""
    due = settings.get("due")
    if due is None:
        return None
    if not isinstance(due, datetime):
        due = datetime(due.year, due.month, due.day, 23, 59, 59)
    return due if due.tzinfo is not None else due.astimezone()


def parse_moment(text: str) -> datetime | date:
    """An ISO 8601 date or date-time (Gradescope's "2026-12-10T23:59:00.000000-08:00" included), as the
    rubric's `due` would hold it; ValueError otherwise."""
    return date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)


def with_deadline(rubric, due: datetime | date | None = None, due_from: str = "", collected: bool = False,
                  now: datetime | None = None):
    """`rubric` with its knowledge check decided once for a whole grade: scored per question, or
    withheld with the deadline it waits for. `due`: the platform's deadline, which replaces the
    rubric's own (`due_from` says whose it is, for the feedback); `collected`: the work was collected
    after the deadline (no one can resubmit against this feedback), so it is scored whatever the dates."""
    part = rubric.parts.get("knowledge")
    if part is None:
        return rubric
    settings = dict(part.settings)
    if due is not None:
        settings.update(due=due, due_from=due_from)
    elif settings.get("due") is not None:
        settings["due_from"] = RUBRIC_DUE
    if collected or feedback_mode(settings, now) == PER_QUESTION:
        settings["knowledge_feedback"] = PER_QUESTION
    return replace(rubric, parts={**rubric.parts, "knowledge": replace(part, settings=settings)})


def withheld_reason(settings: dict) -> str:
    """Why the knowledge check is not scored yet, in a few words: until when, and by whose deadline."""
    due = deadline(settings)
    if due is None:
        return (f"withheld until the deadline (none is set: {RUBRIC_DUE}, or `grade --after-due-date` "
                "for collected work)")
    return f"withheld until {due:%Y-%m-%d %H:%M %Z}".rstrip() + f" ({settings.get('due_from') or RUBRIC_DUE})"


def withheld_note(settings: dict) -> str:
    """The note on a withheld knowledge check: withheld_reason, and why it is withheld."""
    return (f"{withheld_reason(settings)}, so that resubmitting cannot reveal the answer key; only the form of "
            "each answer is checked now")


def grade(answers: dict, points: float, settings: dict, key: dict | None = None, path: Path = QUESTIONS_FILE) -> list:
    """Result rows worth the rubric's `points` together, for the knowledge `settings` of the rubric
    being graded with (feedback_mode): PER_QUESTION, one row per autograded question; WITHHELD, one
    row of status "skipped" (not graded yet) that says only what is wrong with the form of answers,
    read without the key."""
    graded = autograded(questions(path))
    if feedback_mode(settings) == WITHHELD:  # never the key: nothing here can depend on it
        problems = [form_problem(q, answers.get(q.variable)) for q in graded]
        return [withheld_row([p for p in problems if p], points, deadline(settings))]
    each = points / len(graded)
    key = load_key() if key is None else key
    return [_row(q, *check(q, key[q.id], answers.get(q.variable)), each) for q in graded]


ROW_PREFIX = "knowledge: "  # a question's result row is named ROW_PREFIX + its id


def question_of_row(name: str) -> str | None:
    """The question id a knowledge result row is named after (_row's names), or None."""
    return name.removeprefix(ROW_PREFIX) if name.startswith(ROW_PREFIX) else None


def _row(question: Question, passed: bool, message: str, each: float) -> dict:
    return {"name": f"{ROW_PREFIX}{question.id}", "part": "knowledge", "question": question.id,
            "score": each if passed else 0.0, "max_score": each, "status": "passed" if passed else "failed",
            "output": message}


def withheld_row(problems: list, points: float, due: datetime | None = None) -> dict:
    """The knowledge check before the deadline (`due`, when one is known): nothing in it depends on the key."""
    when = f"after the deadline ({due:%Y-%m-%d %H:%M %Z})".replace(" )", ")") if due else "after the deadline"
    output = (f"Your knowledge-check answers are kept. Whether they are right, and the {points:g} points, are given "
              f"{when}; until then only the form of each answer is checked"
              + (":" + "".join(f"\n{line}" for line in problems) if problems else ", and every one is well formed."))
    return {"name": "knowledge check", "part": "knowledge", "question": None, "score": 0.0, "max_score": points,
            "status": "skipped", "output": output}  # scoring.Row's "not graded" status


def answers_module(all_questions: list) -> str:
    """assignment/knowledge.py: every question of the notebook as comments, each autograded answer
    variable None; written questions (graded by hand) are marked so and answered as a string."""
    lines = ['"""Knowledge check, for students who work in files rather than in the notebook.',
             "",
             "Replace each None with your answer. The grader reads the values you assign (a string,",
             "True/False or a number) without running this file, so write plain values, not expressions.",
             "The same questions are in assignment/mhsa.ipynb: answer here when your code is in mhsa.py,",
             "in the notebook when your code is there (the file graded decides which answers count).",
             '"""']
    for q in all_questions:
        if not q.autograded:  # the same question as the notebook's, graded by a person, not here
            lines += ["", *_comment(f"{q.id} (written answer, {q.points:g} point(s), graded by hand, not by the "
                                    f"autograder). {q.text}"),
                      "# Answer in a sentence or three, as a string.", f'{q.variable} = ""']
            continue
        lines += ["", *_comment(f"{q.id}. {q.text}")]
        lines += [f'#   "{letter}": {text}' for letter, text in q.choices.items()]
        lines += [f"# Answer with {q.how_to_answer()}.", f"{q.variable} = None"]
    return "\n".join(lines) + "\n"


def _comment(text: str, width: int = 96) -> list:
    words, lines, line = text.split(), [], "#"
    for word in words:
        if len(line) + 1 + len(word) > width and line != "#":
            lines.append(line)
            line = "#  "
        line += " " + word
    return lines + [line]
