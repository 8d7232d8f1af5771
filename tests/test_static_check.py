"""The static scan finds forbidden APIs and evasions by reading the source, and maps them to parts."""
import pytest

from autograder import rubric as rubric_file
from autograder.grading import forbidden_parts
from autograder.rubric import REPO
from autograder.static_check import scan


def test_reference_is_clean():
    assert scan((REPO / "reference" / "mhsa.py").read_text()) == []


@pytest.mark.parametrize("snippet, fragment", [
    ("import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
     "F.scaled_dot_product_attention"),
    ("from torch.nn import MultiheadAttention\n", "nn.MultiheadAttention"),
    ("import torch\ndef f(x):\n    return torch.nn.TransformerEncoderLayer(8, 2)(x)\n", "nn.TransformerEncoderLayer"),
    ("import torch.nn.functional as F\ndef f(x):\n    return getattr(F, 'scaled_dot_product_attention')(x, x, x)\n",
     "in a string"),
    ("import torch\ndef f(x):\n    return torch.ops.aten.mm(x, x)\n", "torch.ops"),
    ("import sys\ndef f():\n    return sys.modules['executor']\n", "sys.modules"),
    ("def f():\n    return __import__('os')\n", "__import__"),
    ("import importlib\n", "importlib"),
])
def test_forbidden_uses_are_found(snippet, fragment):
    findings = scan(snippet)
    assert findings and fragment in findings[0].message


def test_the_students_own_function_of_the_same_name_is_allowed():
    source = ("def scaled_dot_product_attention(q, k, v):\n    return q\n"
              "class MultiHeadSelfAttention:\n    def forward(self, x):\n"
              "        return scaled_dot_product_attention(x, x, x)\n")
    assert scan(source) == []


def test_findings_zero_the_part_of_the_function_they_are_in():
    source = ("import torch.nn.functional as F\n"
              "def scaled_dot_product_attention(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
              "def split_heads(x, h):\n    return x\n")
    zeroed = forbidden_parts(source, rubric_file.load())
    assert list(zeroed) == ["sdpa"] and "line 3" in zeroed["sdpa"][0]


def test_module_level_findings_zero_every_code_part():
    zeroed = forbidden_parts("from torch.nn import MultiheadAttention\n", rubric_file.load())
    assert set(zeroed) == {"sdpa", "heads", "masks", "mhsa", "block", "timing"}


def test_unparsable_source_yields_no_findings():
    assert scan("def f(:\n") == []
