"""The diagnosis measured where it was not tuned: on mechanically generated mutants (mutate.py).

What a generated mutant gets wrong is not declared by anyone: it is read from its behaviour on fresh
inputs (probes.FRESH_PROBES: the diagnosis's probes on other values, which it never sees). On those,
the part where the mistake shows first (masks and heads before sdpa, sdpa before self-attention,
self-attention before the block) is compared with every catalog entry: the model of each entry is run
on the same calls and compared value by value (gradients included), and each check for what a model
cannot predict is asked again. Then the mutant is

  equivalent  when no part differs from a correct solution and no check fires (dropped, unless the
              diagnosis names something for it all the same: that is wrong),
  model       when exactly one catalog entry's model reproduces it (its label),
  check       when no model does and exactly one check fires,
  ambiguous   when several entries reproduce it equally (naming one would be a guess),
  unmatched   when none does (a mistake the catalog does not know).

and the diagnosis, run as grading runs it (on the usual probes), is
  wrong  when it names, for any part, a mistake that the fresh inputs do not reproduce for that part,
  right  when it names the label where the mistake shows first,
  none   otherwise (it said nothing there).
Corpus code is trusted, so mutants run in-process.
"""
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.feedback.diagnosis import identify
from autograder.feedback.diagnosis.catalog import CATALOG, Evidence
from autograder.feedback.diagnosis.model import simulate
from autograder.feedback.diagnosis.probes import FRESH_PROBES, Session
from autograder.testing.backends import InProcessBackend

ORDER = ("masks", "heads", "sdpa", "mhsa", "block")  # a part before the parts that call it
EQUIVALENT, MODEL, CHECK, AMBIGUOUS, UNMATCHED, BROKEN = "equivalent", "model", "check", "ambiguous", \
    "unmatched", "broken"
RIGHT, NONE, WRONG = "right", "none", "wrong"


@dataclass
class Judged:
    kind: str                 # EQUIVALENT | MODEL | CHECK | AMBIGUOUS | UNMATCHED | BROKEN
    part: str = ""            # where the mistake shows first
    matches: tuple = ()       # the catalog ids its behaviour on fresh inputs reproduces there
    named: dict = field(default_factory=dict)  # part -> id the diagnosis names
    unbacked: dict = field(default_factory=dict)  # part -> id named without fresh evidence
    verdict: str = ""         # RIGHT | NONE | WRONG (an equivalent mutant: WRONG or empty; a broken one: empty)


def reproduced(fresh: Evidence, part: str) -> tuple:
    """The catalog entries whose model (or check) the part's behaviour on fresh inputs reproduces on
    every probe; failing any, those it reproduces on some, the rest right, while a part that calls it
    reproduces them on all (Evidence.supports: the evidence the diagnosis itself is held to)."""
    whole = tuple(m.id for m in CATALOG if part in m.parts and fresh.shows(part, m))
    return whole or tuple(m.id for m in CATALOG if part in m.parts and fresh.supports(part, m))


def backed(fresh: Evidence, part: str, misconception_id: str) -> bool:
    """The fresh inputs support the misconception for the part (on every probe or, as above, on some)."""
    return any(m.id == misconception_id and part in m.parts and fresh.supports(part, m) for m in CATALOG)


def judge(path) -> Judged:
    try:
        backend = InProcessBackend(Path(path))
    except Exception:  # noqa: BLE001 - a mutant that cannot even be imported is no attention mistake
        return Judged(BROKEN)
    fresh = Evidence(Session(backend, FRESH_PROBES, predict=simulate))
    named = {p: m.id for p, m in identify(backend, list(ORDER)).items()}
    unbacked = {p: i for p, i in named.items() if not backed(fresh, p, i)}
    differing = [part for part in ORDER if not fresh.correct(part)]
    checked = [part for part in ORDER if any(m.check and part in m.parts and fresh.shows(part, m) for m in CATALOG)]
    if not differing and not checked:  # dropped, unless the diagnosis accuses it of something all the same
        return Judged(EQUIVALENT, named=named, unbacked=unbacked, verdict=WRONG if unbacked else "")
    part = (differing or checked)[0]
    matches = reproduced(fresh, part)
    by_id = {m.id: m for m in CATALOG}
    models = [i for i in matches if by_id[i].variants]
    checks = [i for i in matches if not by_id[i].variants]
    if len(models) == 1 or (not models and len(checks) == 1):
        kind = MODEL if models else CHECK
        matches = tuple(models or checks)
    else:
        kind = AMBIGUOUS if len(matches) > 1 else UNMATCHED
    if unbacked:
        verdict = WRONG
    elif kind in (MODEL, CHECK, AMBIGUOUS) and named.get(part) in matches:
        verdict = RIGHT
    else:
        verdict = NONE
    return Judged(kind, part, matches, named, unbacked, verdict)


def judge_all(mutants) -> dict:
    """mutant id -> Judged, for GeneratedMutants (their sources written to a scratch folder)."""
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for n, mutant in enumerate(mutants):
            path = Path(folder) / f"mutant_{n}.py"
            path.write_text(mutant.source)
            results[mutant.id] = judge(path)
    return results


@dataclass
class Figures:
    generated: int
    kinds: dict       # kind -> count
    verdicts: dict    # (kind, verdict) -> count

    @property
    def matched(self) -> int:
        """Mutants whose outputs reproduce exactly one catalog entry."""
        return self.kinds.get(MODEL, 0) + self.kinds.get(CHECK, 0)

    def count(self, verdict, kinds=None) -> int:
        return sum(n for (kind, v), n in self.verdicts.items() if v == verdict and (kinds is None or kind in kinds))

    @property
    def right_on_matched(self) -> int:
        return self.count(RIGHT, (MODEL, CHECK))


def figures(judged: dict) -> Figures:
    values = list(judged.values())
    return Figures(len(values), dict(Counter(j.kind for j in values)),
                   dict(Counter((j.kind, j.verdict) for j in values if j.verdict)))
