"""Pairs of submissions whose solution code is unusually alike, by copydetect's fingerprints.

copydetect winnows fingerprints (the algorithm behind MOSS): code is tokenized (names, strings and
comments do not count, so renaming variables or rewording comments changes nothing), k-grams of
tokens are hashed and winnowed, and two files are compared by the share of their fingerprinted
tokens they have in common.

The stub text of assignment/mhsa.py (signatures, docstrings, the `raise NotImplementedError` lines) is
copydetect's boilerplate: every student starts from it, so its fingerprints are removed before
comparing, and only the students' own code counts.
"""
import html
import io
import itertools
from dataclasses import dataclass

from autograder.core.paths import ASSIGNMENT

NOISE_TOKENS = 25        # k-gram length: shorter shared runs are coincidence (copydetect's default)
WINDOW = 1               # keep every k-gram: the files are small, precision matters more than speed
THRESHOLD = 0.7          # listed when both files share at least this much of their own code
MIN_TOKENS = 100         # less own code than this (untouched stubs) is not compared
CONTEXT_LINES = 3


@dataclass
class Pair:
    a: str
    b: str
    share_a: float       # of a's own code, the share also in b
    share_b: float
    view_a: str          # HTML: a's code, the shared runs in <mark>
    view_b: str

    @property
    def score(self) -> float:
        return min(self.share_a, self.share_b)


def similar_pairs(sources: dict, threshold: float = THRESHOLD, boilerplate: str | None = None) -> tuple:
    """([Pair] at or above `threshold`, most alike first; [names with too little own code to compare])."""
    from copydetect import CodeFingerprint, compare_files

    stub = ASSIGNMENT.read_text() if boilerplate is None else boilerplate
    ignored = list(CodeFingerprint("stub.py", NOISE_TOKENS, WINDOW, fp=io.StringIO(stub)).hashes)
    prints, too_small = {}, []
    for name, code in sorted(sources.items()):
        fingerprint = CodeFingerprint(f"{name}.py", NOISE_TOKENS, WINDOW, boilerplate=ignored, fp=io.StringIO(code))
        if fingerprint.token_coverage < MIN_TOKENS:
            too_small.append(name)
        else:
            prints[name] = fingerprint
    pairs = []
    for a, b in itertools.combinations(sorted(prints), 2):
        _, (share_a, share_b), (slices_a, slices_b) = compare_files(prints[a], prints[b])
        if min(share_a, share_b) >= threshold:
            pairs.append(Pair(a, b, float(share_a), float(share_b),
                              _highlight(prints[a].raw_code, slices_a), _highlight(prints[b].raw_code, slices_b)))
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b)), too_small


def _highlight(code: str, slices) -> str:
    from copydetect.utils import highlight_overlap

    if len(slices) == 0 or slices.shape[-1] == 0:
        return html.escape(code)
    marked, _ = highlight_overlap(code, slices, "<mark>", "</mark>", truncate=CONTEXT_LINES, escape_html=True)
    return marked
