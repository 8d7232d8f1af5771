"""What `python -m autograder check` prints: the public tests' results as a student reads them.

The grade is the one the grading engine made (results.py writes it for instructors); this view
orders the parts as the handout does, says why a part is not graded here, shows each distinct
failure once with how many tests it fails, and caps what one part prints, so that the untouched
stubs fit on one screen.
"""
from collections import OrderedDict

from autograder.intake import knowledge
from autograder.record import results
from autograder.record.grade import Status

FAILURES_PER_PART = 3   # distinct failures shown per part; the rest are one `pytest -k` away
MESSAGE_LINES = 12      # lines of one failure message (a traceback past that is in pytest's output)
NOT_GRADED_HERE = {
    "timing": "not graded here: timing runs only where your course grades it (its GPU, or the "
              "instructor's CPU setting)",
    "knowledge": "not graded here: the answer key is the instructor's; the form of your answers is "
                 "checked below",
}


def report(grade, rubric) -> str:
    if not grade.status.has_grade:
        return f"{results.clean_name(grade.submission)}: not checked\n{results.printable(grade.message)}"
    lines = [f"{results.clean_name(grade.submission)}: {grade.score:.2f} / {grade.max_score:.2f} points from the public tests "
             f"(isolation: {grade.isolation}; {grade.execution_time:.1f} s)"]
    lines += results.held_lines(grade) if grade.status == Status.HELD else []
    lines += [results.printable(note) for note in grade.notes]
    lines += ["", f"  {'part':<10} {'score':>15}  {'tests passed':>12}"]
    for name, part in rubric.parts.items():
        scored = grade.parts.get(name)
        if scored is None or not scored.graded:
            lines.append(f"  {name:<10} {NOT_GRADED_HERE.get(name, 'not graded here')}")
            continue
        mine = [t for t in grade.tests if t.part == name]
        state = f"{scored.score:.2f} / {scored.max_score:g}"
        lines.append(f"  {name:<10} {state:>15}  {sum(t.passed for t in mine):>6}/{len(mine):<5}  {part.title}")
        lines += [f"      {results.printable(note)}" for note in OrderedDict.fromkeys(scored.notes) if note]
        if scored.diagnosis:
            lines.append(f"      {results.LIKELY_MISTAKE}{scored.diagnosis}")
        if scored.picture_text:
            lines += ["", *(f"      {line}".rstrip() for line in scored.picture_text.splitlines()), ""]
    lines.append(f"\n  Maximum here: the test-graded parts ({grade.max_score:g} points). Hidden tests, the "
                 "knowledge key and timing are graded by your course.")
    for name in rubric.parts:
        # A forbidden API is said once, in the part's notes above, not again for every test it failed.
        lines += failures(name, [t for t in grade.tests if t.part == name and not t.passed and not t.forbidden],
                          rubric)
    lines += ["", "Knowledge check (form only):",
              *(f"  {line}" for line in (knowledge_form(grade.knowledge_answers) if grade.knowledge_answers is not None
                                         else ["no answers found: knowledge.py beside your mhsa.py, or the "
                                               "notebook's answer cells, hold them"]))]
    return "\n".join(lines)


def failures(part: str, failed: list, rubric) -> list:
    """Each distinct failure of a part once (the first line of its summary tells them apart), with
    how many tests it fails; at most FAILURES_PER_PART of them."""
    groups = OrderedDict()
    for test in failed:
        groups.setdefault((test.summary or "failed").splitlines()[0], []).append(test)
    lines = []
    for tests in list(groups.values())[:FAILURES_PER_PART]:
        first = tests[0]
        others = f" and {len(tests) - 1} more test(s) with the same failure" if len(tests) > 1 else ""
        text = results.test_output(first, rubric).splitlines()
        if len(text) > MESSAGE_LINES:
            text = text[:MESSAGE_LINES] + [f"[... {len(text) - MESSAGE_LINES} more lines: pytest tests_public -k "
                                           f"{first.name.split('[')[0]}]"]
        lines += ["", f"  FAILED {part}: {first.name}{others}", *(f"      {line}" for line in text if line.strip())]
    hidden = len(groups) - FAILURES_PER_PART
    if hidden > 0:
        count = sum(len(tests) for tests in list(groups.values())[FAILURES_PER_PART:])
        lines.append(f"  {count} more failed test(s) of '{part}', failing another way: "
                     f"pytest tests_public -k {part}")
    return lines


def knowledge_form(answers: dict) -> list:
    """One line per question whose answer is missing or not of the right form (knowledge.py's rules)."""
    try:
        questions = knowledge.autograded(knowledge.questions())
    except FileNotFoundError:
        return ["the questions file is missing: your answers cannot be checked here"]
    unanswered = [q.id for q in questions if answers.get(q.variable) is None]
    lines = [problem for q in questions if answers.get(q.variable) is not None
             for problem in [knowledge.form_problem(q, answers[q.variable])] if problem]
    if unanswered:
        lines.append(f"not answered yet: {', '.join(unanswered)}")
    return lines or [f"all {len(questions)} answers are plain values of the right kind"]
