"""The diagnosis on mechanically generated mutants: the figures of docs/hidden-tests.md and the README.

    python benchmarks/diagnosis_generated.py            # every mutant (about 1000; minutes)
    python benchmarks/diagnosis_generated.py --share 5  # a fixed fifth of them, for a quick look
    python benchmarks/diagnosis_generated.py --grade-equivalents  # and grade the ones judged equivalent
    python benchmarks/diagnosis_generated.py --json OUT.json     # and every mutant's judgement, for a closer look

Every one-place mutant that tools/mutate.py makes of the reference, corpus/valid and
corpus/styles is judged by tools/heldout.py: what it gets wrong is read from its outputs
on fresh inputs (each catalog model run on the same calls), then compared with what the diagnosis
names. Prints the counts per kind and per style and every wrong diagnosis; exit status 1 when any
diagnosis is wrong, when fewer than 90% of the mutants that match one catalog entry are diagnosed
right, or when the right count falls below the committed figure (corpus/generated-figures.toml).
"""
import argparse
import json
import platform
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.core import toml  # noqa: E402
from tools import heldout, mutate  # noqa: E402

COMMITTED = REPO / "corpus" / "generated-figures.toml"
RIGHT_SHARE = 0.90


def _judge_chunk(chunk):
    import torch

    torch.set_num_threads(1)  # tiny tensors: threads only contend (ten times slower on two cores)
    return heldout.judge_all(chunk)


def judge_everything(mutants, processes: int) -> dict:
    chunks = [mutants[i::processes] for i in range(processes)]
    with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as pool:
        judged = {}
        for part in pool.map(_judge_chunk, chunks):
            judged |= part
    return judged


def grade_equivalents(mutants, judged, processes: int) -> None:
    """Equivalence is judged on the probes; the test suites say whether a dropped mutant really
    passes everything. One that does not is a mistake the probes miss: it counts as unmatched."""
    import tempfile

    from tools import corpus

    dropped = [m for m in mutants if judged[m.id].kind == heldout.EQUIVALENT]
    with tempfile.TemporaryDirectory() as folder:
        jobs = []
        for n, m in enumerate(dropped):
            path = Path(folder) / f"equivalent_{n}.py"
            path.write_text(m.source)
            jobs.append((m.id, path, None))
        lost = corpus.grade_all(jobs, processes)
    failing = {mutant_id: sorted(parts) for mutant_id, parts in lost.items() if parts}
    print(f"\nthe {len(dropped)} judged equivalent, graded with every suite: {len(dropped) - len(failing)} pass "
          f"every test, {len(failing)} lose points")
    for mutant_id, parts in failing.items():
        print(f"  not equivalent: {mutant_id} loses points in {parts}; named {judged[mutant_id].named or 'nothing'}")
        judged[mutant_id].kind = heldout.UNMATCHED
        judged[mutant_id].verdict = judged[mutant_id].verdict or heldout.NONE
    print()


def _row(label, figures) -> str:
    matched = figures.matched
    share = f"{figures.right_on_matched / matched:.0%}" if matched else "-"
    return (f"{label:<30} {figures.generated:>5} {figures.kinds.get(heldout.EQUIVALENT, 0):>5} {matched:>7} "
            f"{figures.right_on_matched:>5} ({share:>4}) {figures.count(heldout.RIGHT, (heldout.AMBIGUOUS,)):>5} "
            f"{figures.kinds.get(heldout.UNMATCHED, 0):>9} {figures.count(heldout.WRONG):>5}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=int, default=1, help="keep 1 in SHARE mutants (a fixed choice)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--grade-equivalents", action="store_true",
                        help="grade the mutants judged equivalent with every suite (about 5 s each)")
    parser.add_argument("--json", type=Path, help="write each mutant's style, operator, kind, part, matches, "
                        "names and verdict to this file")
    args = parser.parse_args(argv)
    print(f"{date.today()}, {platform.node()}, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")
    mutants = mutate.generate(share=args.share)
    started = time.monotonic()
    judged = judge_everything(mutants, args.processes)
    print(f"judged {len(mutants)} generated mutants of {len({m.style for m in mutants})} styles in "
          f"{time.monotonic() - started:.0f} s ({args.processes} processes)\n")
    if args.grade_equivalents:
        grade_equivalents(mutants, judged, args.processes)
    print(f"{'':<30} {'made':>5} {'equiv':>5} {'matched':>7} {'right':>12} {'ambig right':>5} "
          f"{'unmatched':>9} {'wrong':>5}")
    total = heldout.figures(judged)
    by_style = defaultdict(dict)
    for m in mutants:
        by_style[m.style][m.id] = judged[m.id]
    for style, some in sorted(by_style.items()):
        print(_row(f"  style {style}", heldout.figures(some)))
    print(_row("all", total))
    print(f"\nkinds: {dict(sorted(total.kinds.items()))}")
    for mutant_id, j in judged.items():
        if j.verdict == heldout.WRONG:
            print(f"  wrong: {mutant_id} (shows in {j.part}, reproduces {list(j.matches) or 'nothing'}) "
                  f"named {j.unbacked} without evidence")
        elif j.kind in (heldout.MODEL, heldout.CHECK) and j.verdict != heldout.RIGHT:
            print(f"  none: {mutant_id} (shows in {j.part}, reproduces {j.matches[0]}) named {j.named or 'nothing'}")
    if args.json:
        args.json.write_text(json.dumps({m.id: {"style": m.style, "operator": m.operator, "kind": judged[m.id].kind,
                                                "part": judged[m.id].part, "matches": list(judged[m.id].matches),
                                                "named": judged[m.id].named, "verdict": judged[m.id].verdict}
                                         for m in mutants}, indent=1))
    non_equivalent = total.generated - total.kinds.get(heldout.EQUIVALENT, 0)
    if non_equivalent:
        print(f"coverage: {total.matched} of the {non_equivalent} not judged equivalent reproduce exactly one "
              f"catalog entry ({total.matched / non_equivalent:.0%})")
    committed = toml.loads(COMMITTED.read_text())
    floor = committed["right"] if args.share == 1 else 0
    ok = total.count(heldout.WRONG) == 0 and total.right_on_matched >= RIGHT_SHARE * total.matched \
        and total.right_on_matched >= floor
    print(f"\nright {total.right_on_matched} of {total.matched} matched (committed: {committed['right']} of "
          f"{committed['matched']}), wrong {total.count(heldout.WRONG)}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
