# Helpers of the test cells (read-only). Expected values come from `oracles` above: PyTorch's own
# F.scaled_dot_product_attention, nn.MultiheadAttention and nn.TransformerEncoderLayer, loaded with the
# weights the tests give your module; never from a stored solution.


def _expect_close(actual, expected, what, atol=1e-5, rtol=1e-4):
    """Fails with the shape, dtype or largest difference when `actual` is not `expected`."""
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
    assert actual.shape == expected.shape, \
        f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    actual, expected = actual.detach(), expected.detach()
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol, equal_nan=True):
        error = (actual.double() - expected.double()).abs().nan_to_num(float("inf")).max().item()
        raise AssertionError(f"{what}: values differ from the expected ones (largest difference {error:.3g})")


def _expect_weights(actual, expected, what, **tolerance):
    """_expect_close for attention weights and masks: when the values differ, it first shows the expected
    ones and yours side by side."""
    try:
        _expect_close(actual, expected, what, **tolerance)
    except AssertionError:
        if isinstance(actual, torch.Tensor) and actual.shape == expected.shape and actual.is_floating_point():
            try:
                _side_by_side(actual, expected, what)
            except Exception:  # a picture that cannot be drawn must not hide the failure
                pass
        raise


def _side_by_side(actual, expected, what):
    """Expected | yours | yours - expected for the first (queries x keys) matrix where they differ by more
    than 0.01, to two decimals, the differing cells marked: three tables in Jupyter, else printed."""
    import html
    import sys

    yours, want = actual.detach().cpu().double(), expected.detach().cpu().double()
    gap = torch.where(yours == want, 0.0, yours - want)  # -inf and -inf (both blocked) are equal
    far = ~(gap.abs() <= 0.01)  # NaN differs too
    if yours.dim() < 2 or not far.any():
        return
    index = tuple(int(i) for i in far.nonzero()[0][:-2])  # the batch (and head) of the first difference
    far, blocks = far[index], {"expected": want[index], "yours": yours[index], "yours - expected": gap[index]}
    title = f"{what}{list(index) if index else ''}: rows = queries, columns = keys; marked: differs by more than 0.01"
    queries, keys = far.shape

    def marked(name, i, j):
        return bool(far[i, j]) and name != "expected"

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if getattr(shell, "kernel", None) is not None:  # a Jupyter notebook: three tables
        from IPython.display import HTML, display
        mark = "; outline: 2px solid #e000a0; font-weight: bold"
        tables = ""
        for name, m in blocks.items():
            rows = ["".join(f'<td style="padding: 1px 6px; text-align: right{mark if marked(name, i, j) else ""}">'
                            f"{m[i, j]:.2f}</td>" for j in range(keys)) for i in range(queries)]
            tables += f"<table><caption>{name}</caption><tr>{'</tr><tr>'.join(rows)}</tr></table>"
        display(HTML(f'<p>{html.escape(title)}</p><div style="display: flex; gap: 2em">{tables}</div>'))
    else:
        print(title, " | ".join(name.ljust(6 * keys) for name in blocks).rstrip(), sep="\n")
        for i in range(queries):
            print(" | ".join("".join(f"{m[i, j]:5.2f}{'*' if marked(name, i, j) else ' '}" for j in range(keys))
                             for name, m in blocks.items()).rstrip())


def _load(module, state):
    """Loads `state` into your module; the message names the parameters the tests expect."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise AssertionError(f"your module's parameters must be named {sorted(state)}: {err}") from None
    return module.eval()


def _weights(d_model, d_ff=None, dtype=torch.float32):
    """Random weights for MultiHeadSelfAttention(d_model, ...), or for TransformerBlock with d_ff."""
    draw = oracles.draws(dtype=dtype)
    return oracles.mhsa_state(d_model, draw) if d_ff is None else oracles.block_state(d_model, d_ff, draw)


def _quick_check_passed(name):
    """What a public test cell says when it passes: it tried a few cases, not the public tests."""
    print(f"{name}: quick check passed. These cells try a few cases only; the public tests try many more "
          "(every kind of mask, dtypes, dropout, gradients). Run them on this notebook, from the root of the "
          "assignment's repository, with: python -m autograder check assignment/mhsa.ipynb")


def _likely_mistake_after_failure(result):
    """After a quick-check cell fails, the likely mistake the grader would name for the function it
    tests, when this notebook sits in the assignment's repository (the student release: the grader's
    package one folder up). Anywhere else, nbgrader's grading included, nothing."""
    import pathlib
    import sys

    first = (getattr(result.info, "raw_cell", "") or "").lstrip().partition("\n")[0]
    root = pathlib.Path.cwd().parent
    if result.error_in_exec is None or not first.startswith("# Tests of ") or not (
            (root / "tests_public").is_dir() and (root / "autograder" / "feedback" / "diagnosis").is_dir()):
        return
    if str(root) not in sys.path:
        sys.path.append(str(root))
    try:
        from autograder.core.rubric import load
        from autograder.feedback import diagnosis
        from autograder.feedback.diagnosis.catalog import CODE
        from autograder.testing.backends import InProcessBackend

        def not_written_yet(*args, **kwargs):  # a function of a later section: like a stub, it explains nothing
            raise NotImplementedError

        kernel = {name: not_written_yet for names in CODE.values() for name in names} | globals()
        parts = load(root / "rubric.toml").part_of(first.removeprefix("# Tests of ").split()[0])
        found = diagnosis.diagnose(InProcessBackend.of_namespace("this notebook", kernel), parts)
    except Exception:  # advice only: the cell's own failure above says what went wrong
        return
    for part, message in found.items():
        print(f"Likely mistake (part {part}): {message}")


def _after_each_cell():
    """Run _likely_mistake_after_failure after every cell of this kernel, once however often this
    cell runs."""
    import sys

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None:
        return
    hooks = shell.events.callbacks["post_run_cell"]
    hooks[:] = [hook for hook in hooks if getattr(hook, "__name__", "") != "_likely_mistake_after_failure"]
    shell.events.register("post_run_cell", _likely_mistake_after_failure)


_after_each_cell()
torch.manual_seed(0)
