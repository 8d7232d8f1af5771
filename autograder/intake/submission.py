"""What a TA hands the grader (a .py file, a folder, a notebook) turned into one mhsa.py to grade.

Everything handed in is untrusted, the paths included: every file is read with autograder/core/handin.py.
"""
import io
import os
import re
import shutil
import sys
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.core.errors import clean_name, clean_text
from autograder.core.handin import GradingError, read_regular, refuse_link
from autograder.isolation.host.levels import torch_init_file


@dataclass(frozen=True)
class Submission:
    name: str
    origin: Path           # what was handed in
    source: Path           # the mhsa.py that is graded (a private copy)
    knowledge: dict | None  # knowledge-check answers, read without running anything; None if absent
    notes: tuple = ()       # which file of a folder was graded and why, when there was a choice


def load(path: Path, workdir: Path) -> Submission:
    """Copy (or extract) the submission into `workdir`; never imports or runs it, never follows links.
    Whatever was handed in, the result is a Submission or a GradingError that says why: a grade
    with no results file and a traceback helps nobody, so anything unforeseen in the input is
    reported as unreadable too."""
    try:
        return _load(Path(path), Path(workdir))
    except GradingError:
        raise
    except Exception as err:  # noqa: BLE001 - the input is untrusted; see the docstring
        raise GradingError(f"{clean_name(path)}: could not be read ({type(err).__name__}: "
                           f"{clean_text(err, 300)})") from None


def _load(path: Path, workdir: Path) -> Submission:
    refuse_link(path)
    if not path.exists():
        raise GradingError(f"{clean_name(path)}: no such file or folder")
    target = workdir / "mhsa.py"
    if path.suffix == ".ipynb":
        from autograder.intake import notebook

        copy = workdir / "submission.ipynb"  # extracted from a private copy, never from the link
        copy.write_bytes(read_regular(path))
        source, answers = notebook.extract_submission(copy, path.name)
        target.write_text(source)
        answers, note = notebook_answers(answers, path.parent / "knowledge.py")
        return Submission(path.stem, path, target, answers, (note,) if note else ())
    if path.is_dir():
        from autograder.intake import route  # the one rule for which file of a folder is the work

        chosen = route.pick(path)
        if chosen.path.suffix == ".ipynb":
            graded = _load(chosen.path, workdir)
            return replace(graded, notes=(chosen.note, *graded.notes))
        graded, left_out = partial_module(read_regular(chosen.path), chosen.path.name)
        target.write_bytes(graded)
        answers, knowledge_notes = read_knowledge(chosen.knowledge)
        notes = left_out + ((chosen.note,) if chosen.note else ()) + knowledge_notes
        return Submission(path.name.removesuffix(".py"), path, target, answers, notes)
    if path.suffix == ".py":
        graded, left_out = partial_module(read_regular(path), path.name)
        target.write_bytes(graded)
        # The handout's layout: knowledge.py beside mhsa.py holds its answers. Beside a file named
        # otherwise (alice.py in a folder of submissions) it would be nobody's in particular.
        answers, notes = read_knowledge(path.parent / "knowledge.py" if path.name == "mhsa.py" else None)
        return Submission(path.name.removesuffix(".py"), path, target, answers, left_out + notes)
    raise GradingError(f"{clean_name(path)}: expected a .py file, a .ipynb notebook or a folder holding mhsa.py")


def partial_module(data: bytes, name: str) -> tuple:
    """(the mhsa.py to grade, notes on what was left out) for the .py file `name` handed in as `data`.
    A file that compiles is graded byte for byte. One that does not would fail every test at import,
    so it is graded as the notebook route grades a cell that does not compile: the top-level chunks
    that do not compile are left out (what they define replaced by a function that raises, blank
    lines for the rest, so that every kept line keeps its number for tracebacks and the static scan),
    and only what they define scores 0. When that leaves no module that compiles, the file is too
    deeply nested for the parser here, or it is not UTF-8, it is graded as it was handed in."""
    name = clean_name(name)
    whole = _compiles(data, name)
    # Code too deep for this process's parser may still compile in the worker: the scan's own rule
    # for such a file (held for a person) decides, not a rebuilt module without it
    if whole is None or not isinstance(whole, (SyntaxError, ValueError)):
        return data, ()
    try:
        lines = data.decode("utf-8-sig").split("\n")
    except UnicodeDecodeError:
        return data, ()
    from autograder.intake.notebook import DEFINITION  # how the notebook route names what a cell defines

    kept, notes = [], []
    for first, last in top_level_chunks(lines):
        chunk = "\n".join(lines[first:last])
        err = _compiles(chunk, name)
        if err is None:
            kept += lines[first:last]
            continue
        names = DEFINITION.findall(chunk)
        # Each name it defines is still defined, one line each, by a function that says why it cannot
        # run: no later use of the name reads as a library function's in the static scan
        placeholders = [stand_in(n) for n in names if n.isidentifier()][:last - first]
        kept += placeholders + [""] * (last - first - len(placeholders))
        defined = ", ".join(names)
        reason = err.msg if isinstance(err, SyntaxError) else str(err) or "nested too deeply to read"
        line = first + (getattr(err, "lineno", None) or 1)
        notes.append(f"{name} line {line} does not compile ({type(err).__name__}: {clean_name(reason)}): "
                     + (f"what it defines ({clean_name(defined)}) is missing and scores 0"
                        if defined else "it is left out") + "; the rest is graded")
    rebuilt = "\n".join(kept)
    if _compiles(rebuilt, name) is not None:
        return data, ()  # split in a bad place: grading it as handed in at least says why it fails
    return rebuilt.encode("utf-8"), tuple(notes)


def stand_in(name: str) -> str:
    """The one line that defines `name` in place of a chunk that did not compile (partial_module)."""
    return f"def {name}(*args, **kwargs): raise NotImplementedError({f'{name} did not compile'!r})"


def _compiles(source, name: str):
    """None when `source` compiles, else the error (as notebook.extract catches them: RecursionError
    and MemoryError are code nested too deep for the parser)."""
    try:
        compile(source, name, "exec", dont_inherit=True)
        return None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return err


# Lines at column 0 that go on the statement above rather than start one.
CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b|[)\]}]")


def top_level_chunks(lines: list) -> list:
    """[(first, end)] line ranges (0-based, end excluded) of `lines`, one per top-level statement with
    the blank lines and comments after it: a chunk starts at a line at column 0 that is not blank, a
    comment, a continuation (`else:`, a closing bracket, the line after a backslash or a decorator)
    or inside a string that spans lines (the module docstring's text often starts at column 0)."""
    starts = [0]
    in_strings = _inside_strings("\n".join(lines))
    for i, line in enumerate(lines[1:], start=1):
        above = lines[i - 1].rstrip()
        if (line.strip() and not line[0].isspace() and line[0] != "#" and not CONTINUATION.match(line)
                and not above.endswith("\\") and not above.startswith("@") and i + 1 not in in_strings):
            starts.append(i)
    return list(zip(starts, starts[1:] + [len(lines)]))


def _inside_strings(source: str) -> set:
    """Line numbers (1-based) that are the second or a later line of a string token. Tokens are read
    up to the first that cannot be: after it, lines alone decide."""
    inside = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", None):
                inside.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


def read_knowledge(path: Path | None) -> tuple:
    """(answers, notes) from the knowledge.py at `path`: (None, ()) when there is none. A file that
    cannot be read or parsed costs the knowledge check only, never the code's grade: the notes say
    why, and answers on lines of their own are still read (knowledge.read_answers_leniently)."""
    if path is None or not os.path.lexists(path):
        return None, ()
    from autograder.intake import knowledge

    try:
        text = read_regular(path).decode("utf-8", "replace")
    except GradingError as err:
        return {}, (f"knowledge check: {err}; its answers count as not given",)
    answers, problem = knowledge.read_answers_leniently(text)
    return answers, ((f"knowledge check: {clean_name(path.name)} {problem}",) if problem else ())


def notebook_answers(answers: dict, beside: Path) -> tuple:
    """(the knowledge answers of a notebook submission, a note for the student or ""). The notebook's
    answer cells are the answers; when they are all empty and a knowledge.py beside the notebook holds
    answers, those are used, since that is plainly where the student answered. Either way the note
    says which answers were read when both places could have held them."""
    found, problems = read_knowledge(beside)
    if found is None:
        return answers, ""
    if problems and not any(v is not None for v in found.values()):
        return answers, f"{problems[0]}; the knowledge answers are the notebook's"
    if not any(v is not None for v in found.values()):
        return answers, ""
    if any(v is not None for v in (answers or {}).values()):
        return answers, (f"the knowledge answers are the notebook's answer cells; {beside.name} beside it also "
                         "holds answers and was not used (the answers go with the file that is graded)")
    return found, (f"the knowledge answers were read from {beside.name} beside the notebook, whose answer "
                   "cells are empty")


def safe_to_hide(path: Path) -> bool:
    """Hiding a folder that holds the Python installation would break the worker's own imports."""
    path = Path(path).resolve()
    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve(), Path(shutil.__file__)]
    torch = torch_init_file()
    if torch is not None:
        needed.append(torch)
    return all(path != n.resolve() and path not in n.resolve().parents for n in needed)
