"""Hints that blame a cause the code does not have, counted over the mutant corpus.

    python benchmarks/hints.py [--checkout DIR] [--manifest mutants,mutants-styles,mutants-heldout]

A hint that names a cause (dropout, an overflow, a detached graph, heads averaged, a mask on the wrong
axis) belongs to a family below. Every mutant of the corpus is run through the public and hidden
suites of `--checkout` (default: this tree), half of them in each of two child processes that import
that checkout's code once; a failed test whose hint belongs to a family the mutant's misconception is
not in is a misfire. The script prints each misfire and the totals, and how many mutants of each
family's own misconceptions got the family's hint.
"""
import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# family -> (fragments any of which marks a hint as the family's, misconceptions that are its cause).
# A hint about in-place writes shares the detach family: both break the gradient with right values.
FAMILIES = {
    "overflow": (("overflow exp()", "subtract each row's maximum"), {"unstable-softmax"}),
    "dropout in eval": (("dropout applies only when training", "dropout is active only in training mode",
                         "dropout applies in training mode only", "training mode must compute exactly what eval"),
                        {"dropout-in-eval"}),
    "dropout rescale": (("scales the weights it keeps", "kept values are scaled by 1/(1-p)", "survive dropout must be",
                         "the surviving weights are the softmax weights scaled"),
                        {"dropout-no-rescale"}),
    "detach": ((".detach()",), {"detached", "in-place"}),
    "averaged heads": (("averaged over dimension",), {"weights-averaged"}),
    "padding on queries": (("yours blocks queries", "blocks keys (columns of the scores), not queries"),
                           {"padding-on-queries"}),
}

MARK = "hints of "  # starts each line of the child's that reports one file's hints
CHILD = f"""
import json, sys
from pathlib import Path
from autograder.pipeline import grading
for path in sys.argv[1:]:
    collector = grading.ResultCollector()
    grading.run_pytest(Path(path), ("public", "hidden"), collector)
    print({MARK!r} + json.dumps([path, {{t.nodeid: t.hint for t in collector.results.values() if not t.passed}}]))
"""


def family_of(hint: str):
    return next((name for name, (fragments, _) in FAMILIES.items() if any(f in hint for f in fragments)), None)


def failed_hints(checkout: Path, sources: dict, folder: Path) -> dict:
    """key -> {failed test: its hint} for each `sources` key -> program, under the suites of `checkout`,
    in one child process: torch, pytest and the suites are imported once for all of them."""
    paths = {str(folder / f"{key.replace('-', '_')}.py"): key for key in sources}
    for path, key in paths.items():
        Path(path).write_text(sources[key])
    run = subprocess.run([sys.executable, "-c", CHILD, *paths], cwd=checkout, capture_output=True, text=True,
                         timeout=900 + 60 * len(paths), env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"})
    if run.returncode:
        raise RuntimeError(f"{', '.join(sources)}: {run.stderr[-2000:]}")
    reported = dict(json.loads(line[len(MARK):]) for line in run.stdout.splitlines() if line.startswith(MARK))
    return {key: reported[path] for path, key in paths.items()}


def misfires(mutant, hints: dict) -> list:
    """(test, family) for each failed test whose hint names a cause this mutant does not have."""
    found = []
    for test, hint in hints.items():
        family = family_of(hint)
        if family and mutant.misconception not in FAMILIES[family][1]:
            found.append((test, family))
    return found


def main() -> int:
    import tempfile

    from tools.corpus import load_mutants
    from autograder.core.paths import CORPUS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=REPO, help="the tree whose suites give the hints")
    parser.add_argument("--manifest", default="mutants,mutants-styles,mutants-heldout")
    args = parser.parse_args()
    mutants = [m for name in args.manifest.split(",") for m in load_mutants(CORPUS / f"{name}.toml")]
    halves = [{m.id: m.source() for m in mutants[i::2]} for i in range(2)]  # a child per core
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(2) as pool:
        found = {}
        for half in pool.map(lambda sources: failed_hints(args.checkout.resolve(), sources, Path(folder)), halves):
            found |= half
    hints = [found[m.id] for m in mutants]
    wrong, fired = 0, {name: [0, 0] for name in FAMILIES}
    for mutant, found in zip(mutants, hints):
        for test, family in misfires(mutant, found):
            wrong += 1
            print(f"misfire: {mutant.id} ({mutant.misconception}): {family} hint on {test}")
        for name, (_, causes) in FAMILIES.items():
            if mutant.misconception in causes:
                fired[name][1] += 1
                fired[name][0] += any(family_of(h) == name for h in found.values())
    print(f"\n{len(mutants)} mutants, suites of {args.checkout}: {wrong} failed tests whose hint names a cause "
          f"the mutant does not have, over {sum(bool(misfires(m, h)) for m, h in zip(mutants, hints))} mutants")
    for name, (got, of) in fired.items():
        print(f"  {name}: its hint given to {got} of the {of} mutants with that cause")
    return 0


if __name__ == "__main__":
    sys.exit(main())
