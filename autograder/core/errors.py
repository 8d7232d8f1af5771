"""Exceptions that carry what the submission did back into a test, in the grader's process.

An exception raised by student code in the worker comes back as data (type name, message, student
traceback) and is raised again here. Built-in types are kept, so `pytest.raises(ValueError)` holds
whether the submission ran in-process or in the worker; nothing from the worker is unpickled.
"""
import builtins
import re

# Text from a submission (an exception message, printed output, a file name inside a folder) would
# redraw the terminal of whoever reads it (a fake score table), reorder a line (bidirectional
# overrides) or break a results file's viewer. Escape sequences are removed whole, so no "[2J" is
# left behind; any other control character becomes "?", so that something visibly stood there.
ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]"   # CSI: colours, cursor, clear
                             r"|[\x1b\x9d]\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: title, hyperlink
                             r"|\x1b[ -/]*[0-~]")                           # any other escape
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
LINE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
TEXT_CAP = 4000  # characters of any one text from a submission: an exception message, a traceback


def clean_text(value, cap: int = TEXT_CAP, one_line: bool = False) -> str:
    """The one way text from a submission is made safe to print or write (messages, notes, names,
    file names): a string whatever it was, escape sequences removed, other control characters as
    "?" (newline and tab kept unless `one_line`, for a name), at most `cap` characters with a
    marker saying how much there was."""
    text = value if isinstance(value, str) else str(value)
    total = len(text)
    # Cleaning only shortens text, so what is past twice the cap never shows: not worth scanning.
    text = CONTROL.sub("?", ESCAPE_SEQUENCE.sub("", text[:2 * cap].replace("\r\n", "\n")))
    if one_line:
        text = LINE_CONTROL.sub("?", text)
    if len(text) > cap or total > 2 * cap:
        text = text[:cap] + f" [... cut: {total:,} characters in all]"
    return text


def clean_name(value) -> str:
    """A name or file name for one line of a table, a CSV cell or a heading."""
    return clean_text(value, cap=200, one_line=True)


class SubmissionError(Exception):
    """The submission failed in a way a test should report, not the grader."""


class SubmissionRaised(SubmissionError):
    """Student code raised an exception that is not a built-in type."""


class SubmissionImportError(SubmissionError):
    """mhsa.py could not be imported (syntax error, exception, exit or hang at import)."""


class SubmissionTimeout(SubmissionError):
    """A call ran past its time limit; the worker was killed and restarted."""


class GradeStopped(SubmissionTimeout):
    """The whole-submission time limit stopped the grade before or during this call: not the call's fault."""


class SubmissionCrashed(SubmissionError):
    """The worker died during a call: os._exit, a segfault, the memory limit, too much output."""


class ForbiddenApiError(SubmissionError):
    """The submission used an API the assignment forbids; its rubric part scores 0."""


class MonitorSilent(ForbiddenApiError):
    """The forbidden-API monitor could not vouch for a call's record: a person reviews the grade, nothing is zeroed."""


_RAISED = {}


def raised(type_name: str, message: str, student_traceback: str, during: str = "", shapes: str = "") -> SubmissionError:
    """An exception of the student's type (built-ins only) that is also a SubmissionError.

    Its text starts with the type's name: a bare MemoryError or SystemExit has no message at all;
    `shapes` (the worker's shape trace, executor.ShapeTrace) follows the message, before `during`, the
    call that raised it (its arguments' shapes, from Call.signature()), and the student's traceback:
    first, so that the twelve lines `check` shows of a failure hold it.
    """
    type_name, message, student_traceback = (clean_text(type_name, 100), clean_text(message),
                                             clean_text(student_traceback))
    text = f"{type_name}: {message}".rstrip(": ")
    if shapes:
        text += f"\n\n{clean_text(shapes, 2000)}"
    if during:
        text += f"\n\nRaised by the call {during}"
    if student_traceback:
        text += f"\n\nWhere it was raised in your code:\n{student_traceback}"
    base = getattr(builtins, type_name, None)
    if isinstance(base, type) and issubclass(base, Exception) and not issubclass(base, SubmissionError):
        if type_name not in _RAISED:
            _RAISED[type_name] = type(type_name, (SubmissionRaised, base), {"__module__": "builtins"})
        return _RAISED[type_name](text)
    return SubmissionRaised(text)


def add_shape_trace(err: BaseException, shapes: str) -> None:
    """`shapes` (executor.ShapeTrace's text) added to the message of `err`, an exception raised in this
    process (the in-process backend): after the message, as `raised` places it for the worker's errors."""
    if shapes and len(err.args) == 1 and isinstance(err.args[0], str):
        err.args = (f"{err.args[0]}\n\n{shapes}",)
