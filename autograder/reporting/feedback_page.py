"""A student's feedback page on the .py route: one self-contained HTML file per results file of a batch.

The words are the results file's own, written by the grader for the student (results.summary_text for
the summary, results.test_output for each test): the same text Gradescope shows and the nbgrader
feedback adds under its cells (the likely mistake with results.LIKELY_MISTAKE, the part's picture).
Every text is escaped (student code and test output are untrusted); the only markup taken as it is is
a part's picture, which the grader drew from escaped values (autograder/feedback/pictures.py) and the
nbgrader feedback embeds the same way. No script, no network: inline CSS only.
"""
import html
from pathlib import Path

from autograder.core.errors import clean_name
from autograder.record import results

FEEDBACK_FOLDER = "feedback"  # under a batch folder: feedback/<submission>.html
STYLE = """
body { font: 16px/1.45 system-ui, sans-serif; margin: 0 auto; padding: 1em; max-width: 60em; color: #222; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; padding: .6em; border-radius: 4px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; } h3 { font-size: 1em; }
.mistake { background: #fff4d6; padding: .5em; border-left: 4px solid #d9a400; }
.picture { overflow-x: auto; }
@media (max-width: 40em) { body { font-size: 15px; padding: .5em; } pre { font-size: 12px; } }
"""


def page(found: results.Results) -> str:
    """The student's page: the summary (score or hold, each part, its likely mistake), the written
    questions a person scored, each part's picture, then each failed test's message, grouped by part.
    Only rows the student may see now (visibility "visible"): hidden tests and withheld parts stay as
    the results file shows them."""
    name = html.escape(clean_name(found.submission) or "submission")
    body = [f"<h1>Feedback: {name}</h1>", f"<pre>{html.escape(found.output)}</pre>"]
    if found.written:  # scored by a person, outside the autograded score above
        lines = [f"{q}: {w.score:g} / {w.max_score:g}" + (f": {w.note}" if w.note else "")
                 for q, w in found.written.items()]
        body += ["<h2>Written questions, scored by hand</h2>", f"<pre>{html.escape(chr(10).join(lines))}</pre>"]
    shown_parts = {row.tags[0] for row in found.tests if row.tags[1:] == ("part",) and row.visibility == "visible"}
    for part, record in found.parts.items():
        if part not in shown_parts:
            continue
        failed = [row for row in found.tests if row.tags[:1] == (part,) and row.status == "failed"
                  and row.visibility == "visible" and row.tags[1:] != ("part",)]
        if not (failed or record.picture_html):
            continue
        body.append(f"<h2>Part {html.escape(part)}: {html.escape(f'{record.score:g} / {record.max_score:g}')}</h2>")
        mistake = f"{results.LIKELY_MISTAKE}{record.diagnosis.strip()}" if record.diagnosis.strip() else ""
        if mistake:  # named once per part, as the nbgrader feedback does, not under every test
            body.append(f'<p class="mistake">{html.escape(mistake)}</p>')
        if record.picture_html:
            body.append(f'<div class="picture">{record.picture_html}</div>')
        for row in failed:
            text = "\n".join(line for line in row.output.splitlines() if line.strip() != mistake)
            body += [f"<h3>FAILED {html.escape(row.name)}</h3>", f"<pre>{html.escape(text)}</pre>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>Feedback: {name}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_all(batch: Path, out: Path) -> list:
    """FEEDBACK_FOLDER/<name>.html under `out` for each graded or held results file of the batch
    folder `batch`; returns the pages written. A folder without one is an error (ValueError)."""
    graded = {path.stem: found for path in sorted(batch.glob("*.json"))
              if (found := results.load(path, graded_only=True)) is not None}
    if not graded:
        raise ValueError(f"{batch} holds no graded results file (<submission>.json of `grade --batch`)")
    folder = out / FEEDBACK_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, found in graded.items():
        target = folder / f"{stem}.html"
        results.write_atomic(target, page(found))
        written.append(target)
    return written
