"""Fixtures of the hidden tests; the submission itself comes from the plugin's `impl` fixture."""
import pytest
import torch

from autograder.core.paths import REFERENCE
from autograder.testing.backends import InProcessBackend


# The tensors here are tiny: with more than one thread, synchronisation costs ten times the work
# (and the worker runs student code on one thread too, so both sides compute alike).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def ref():
    """The reference solution: trusted, so it runs in the grader's process, unmonitored."""
    backend = InProcessBackend(REFERENCE, trusted=True)
    yield backend
    backend.close()
