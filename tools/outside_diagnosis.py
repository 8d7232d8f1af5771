"""The diagnosis on mistakes written by an outside tester who never saw the catalog (corpus/outside_mistakes/).

    python -m tools.outside_diagnosis             # grade every variant, diagnose its failed parts (minutes)
    python -m tools.outside_diagnosis --no-grade  # diagnose every part whose probes differ (seconds)
    python -m tools.outside_diagnosis --failed F  # the failed parts kept in F (written on the first run)

The tester's manifest names, for each file, the part that holds the mistake and says in words `what`
it is. Which catalog entries state that mistake truly is a reading of those words against the
catalog's messages: JUDGED below records it per file, with the reading, once; the script only
applies it. Each file is graded as grading grades it (public and hidden suites, in-process: the
files are trusted), and its failed parts are diagnosed through a worker with its source, as grading
does, so the messages are the ones a student would read. A file is
  right  when its part is named an entry that states its mistake,
  wrong  when any part is named an entry that does not (a student would be misled),
  none   otherwise (nothing named where the mistake is, nothing wrong anywhere).
Measured once before anything was changed on this set: right 28, none 9, wrong 1; the files changes
were made for afterwards (ADDED_AFTER) are counted apart (docs/hidden-tests.md).
"""
import argparse
import json
import sys
import warnings
from pathlib import Path

from autograder.core import toml
from autograder.core.paths import CORPUS

FOLDER = CORPUS / "outside_mistakes"
PARTS = ("masks", "heads", "sdpa", "mhsa", "block")
RIGHT, WRONG, NONE = "right", "wrong", "none"

# file -> the catalog entries whose message states its mistake (my reading of the manifest's `what`);
# () where no entry does: any name given there is wrong.
JUDGED = {
    "einsum_scale_twice.py": ("scale-by-dk",),  # 1/sqrt(d_k) twice is 1/d_k
    "einsum_softmax_over_queries.py": ("softmax-dim",),
    "einsum_dropout_before_softmax.py": ("dropout-on-scores",),
    "einsum_dropout_not_rescaled.py": ("dropout-no-rescale",),
    "einsum_bool_mask_plus_one.py": ("bool-mask-plus-one",),
    "einsum_kpm_on_queries.py": ("padding-on-queries",),
    "einsum_kpm_b1lk.py": ("padding-mask-3d",),
    "einsum_kpm_unsqueeze_inplace.py": ("in-place",),
    "einsum_causal_blocks_past.py": ("causal-direction",),  # tril(diagonal=-1) blocks below the diagonal
    "einsum_strided_heads.py": ("heads-strided",),
    "einsum_merge_no_transpose.py": ("merge-no-transpose",),
    "einsum_qkv_order.py": ("qkv-order",),
    "einsum_interleaved_qkv.py": ("qkv-per-head",),
    "einsum_weights_averaged.py": ("weights-averaged",),
    "einsum_no_out_proj.py": ("missing-wo",),
    "einsum_dropout_in_eval.py": ("dropout-in-eval",),
    "einsum_ff_on_block_input.py": ("ff-on-block-input",),
    "einsum_ln_no_affine.py": ("norms-without-parameters",),  # elementwise_affine=False
    "einsum_preln_ff_no_residual.py": ("missing-residual",),
    "loops_scale_by_dk.py": ("scale-by-dk",),
    "loops_k_transpose_3d.py": ("fixed-transpose-dims",),  # 3-D only: right once its message stopped saying 4-D only
    "loops_float_mask_as_bool.py": (),  # any nonzero float blocks: no entry says so
    "loops_mask_multiplied_after_softmax.py": ("mask-after-softmax",),
    "loops_weights_detached.py": ("detached",),
    "loops_bool_mask_inverted.py": ("bool-inverted",),
    "loops_merge_inplace_add.py": ("in-place",),  # seen after: += raising "doesn't match the broadcast shape"
    "loops_padding_mask_float.py": ("padding-mask-not-bool",),  # entry added after the first measurement
    "loops_causal_blocks_diagonal.py": ("causal-diagonal",),
    "loops_split_single_view.py": ("split-no-transpose",),
    "loops_merge_view_noncontiguous.py": ("view-not-contiguous",),  # added after the first measurement
    "loops_head_mask_first_only.py": (),  # a per-head mask used for head 0 only: no entry says so
    "loops_dropout_on_context.py": ("dropout-on-output",),  # added after; not "never applied", not "weights before dropout"
    "loops_assert_not_valueerror.py": ("assert-not-value-error",),
    "loops_weights_always_returned.py": ("weights-always-returned",),  # added after the first measurement
    "loops_pre_post_swapped.py": ("pre-post-swapped",),
    "loops_ln_inside_residual.py": ("residual-from-normalized",),  # what: the residual adds norm(x)
    "loops_gelu_sigmoid_approx.py": ("gelu-sigmoid",),  # added after; tanh-gelu names another approximation
    "loops_preln_norms_swapped.py": ("norms-swapped",),  # added after; shared-norm says one serves both
}
# A reading the messages decide: the message of fixed-transpose-dims must fit attention that works
# for 3-D inputs only, as loops_k_transpose_3d's does (before, it said "only works for 4-D inputs").
FITS_ONLY_IF = {"loops_k_transpose_3d.py": lambda message: "only works for 4-D" not in message}
# The files the catalog was changed for after the first measurement, on what it showed: counted apart.
ADDED_AFTER = {"loops_k_transpose_3d.py", "loops_padding_mask_float.py", "loops_dropout_on_context.py",
               "loops_gelu_sigmoid_approx.py", "loops_preln_norms_swapped.py", "loops_merge_view_noncontiguous.py",
               "loops_weights_always_returned.py", "loops_merge_inplace_add.py"}


def manifest() -> list:
    return toml.loads((FOLDER / "manifest.toml").read_text())["mistake"]


def failed_parts(files, processes) -> dict:
    """file -> the parts that lost points, graded with every suite."""
    from tools import corpus

    lost = corpus.grade_all([(f, FOLDER / f, None) for f in files], processes)
    return {f: [p for p in PARTS if p in parts] for f, parts in lost.items()}


def diagnosed(file, parts) -> dict:
    """part -> (misconception id, message) for the given parts, as grading diagnoses: through a worker
    (the file's own name never reaches an error message), with the source."""
    from autograder.feedback.diagnosis import diagnose, identify
    from autograder.isolation.host.levels import Isolation
    from autograder.testing.backends import WorkerBackend

    path = FOLDER / file
    backend = WorkerBackend(path, Isolation("process"))
    try:
        ids = {part: m.id for part, m in identify(backend, parts).items()}
        messages = diagnose(backend, parts, source=path.read_text())
    finally:
        backend.close()
    return {part: (ids[part], messages[part]) for part in ids}


def verdict(entry, named: dict) -> str:
    fitting = JUDGED[entry["file"]]
    fits = FITS_ONLY_IF.get(entry["file"], lambda message: True)
    if any(i not in fitting or not fits(message) for i, message in named.values()):
        return WRONG
    return RIGHT if entry["part"] in named else NONE


def differing_parts(file) -> list:
    """The parts whose probes differ from a correct solution (or trip a check): a quick stand-in for
    the parts a grade would fail."""
    from autograder.feedback.diagnosis.catalog import CATALOG, Evidence
    from autograder.feedback.diagnosis.probes import Session
    from autograder.testing.backends import InProcessBackend

    evidence = Evidence(Session(InProcessBackend(FOLDER / file)))
    return [p for p in PARTS if not evidence.correct(p) or any(
        m.check and p in m.parts and evidence.shows(p, m) for m in CATALOG)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-grade", action="store_true", help="diagnose the parts whose probes differ")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--failed", type=Path, help="a JSON file of the parts each file fails: read when it "
                        "exists (grading takes minutes, the diagnosis seconds), else written")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    entries = manifest()
    unjudged = [e["file"] for e in entries if e["file"] not in JUDGED]
    if unjudged:
        print(f"not judged yet (add them to JUDGED): {unjudged}")
        entries = [e for e in entries if e["file"] in JUDGED]
    files = [e["file"] for e in entries]
    if args.failed and args.failed.is_file():
        failed = json.loads(args.failed.read_text())
        files = [f for f in files if f in failed]
        entries = [e for e in entries if e["file"] in failed]
    else:
        failed = {f: differing_parts(f) for f in files} if args.no_grade else failed_parts(files, args.processes)
        if args.failed:
            args.failed.write_text(json.dumps(failed, indent=1))
    counts, verdicts = {RIGHT: 0, NONE: 0, WRONG: 0}, []
    for entry in entries:
        named = diagnosed(entry["file"], failed[entry["file"]])
        v = verdict(entry, named)
        counts[v] += 1
        verdicts.append((entry, v))
        print(f"{v:<5} {entry['file']} ({entry['part']}: {entry['what']})")
        print(f"      loses points in {failed[entry['file']] or 'nothing'}; fits {list(JUDGED[entry['file']]) or 'no entry'}")
        for part, (i, message) in named.items():
            print(f"      {part}: {i}: {message}")
    print(f"\n{len(entries)} mistakes: right {counts[RIGHT]}, none {counts[NONE]}, wrong {counts[WRONG]}")
    apart = {v: sum(1 for e, v_ in verdicts if v_ == v and e["file"] not in ADDED_AFTER) for v in counts}
    print(f"leaving out the {len(ADDED_AFTER)} whose entries were written after seeing them: right {apart[RIGHT]}, "
          f"none {apart[NONE]}, wrong {apart[WRONG]} of {len(entries) - len(ADDED_AFTER & set(files))}")
    return 0 if counts[WRONG] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
