"""The static scan finds forbidden APIs and evasions by reading the source, and maps them to parts."""
import pytest

from autograder import rubric as rubric_file
from autograder.rubric import REPO
from autograder.static_check import scan


def forbidden_parts(source: str, folder) -> dict:
    """part -> reasons, through the grading pipeline's static-scan stage."""
    from types import SimpleNamespace

    from autograder import grading

    path = folder / "mhsa.py"
    path.write_text(source)
    grade = grading.Grade("mhsa", "process", ("public",), source=path)
    return grading.static_scan(SimpleNamespace(rubric=rubric_file.load()), grade).forbidden


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
    # What Python runs but a UTF-8 reading would take for a comment, and reaches without a name.
    ("# coding: utf-7\nimport torch\n#+AAo-import ctypes\n", "only UTF-8"),
    ("def f():\n    return __builtins__['open']\n", "__builtins__"),
    ("import torch\ndef f():\n    return getattr(torch, '_' + 'C')\n", "computed name"),
    ("import torch\ndef f():\n    return vars(torch)\n", "vars"),
    ("import torch\nm = torch\n", "as a value"),
    ("def f(e):\n    return e.__traceback__.tb_frame.f_back.f_globals\n", "frames"),
    ("def f(x):\n    return x.__class__.__subclasses__()\n", "__subclasses__"),
    ("from torch import _C\n", "torch._C"),
    ("import torch.nn.functional as F\ndef f(a):\n    if a not in ('relu', '_C'):\n        raise ValueError\n"
     "    return getattr(F, a)\n", "computed name"),
    ("import torch.nn.functional as F\ndef f(a):\n    if a not in ('relu', 'gelu'):\n        raise ValueError\n"
     "    a = 'scaled' + '_dot'\n    return getattr(F, a)\n", "computed name"),
] + [(f"import {name}\n", f"imports {name}") for name in
     ("marshal", "types", "pickle", "runpy", "__main__", "executor", "threading", "_thread", "concurrent",
      "multiprocessing", "os", "sys", "ctypes")])
def test_forbidden_uses_are_found(snippet, fragment):
    findings = scan(snippet)
    assert any(fragment in f.message for f in findings), findings


def test_the_students_own_function_of_the_same_name_is_allowed():
    source = ("def scaled_dot_product_attention(q, k, v):\n    return q\n"
              "class MultiHeadSelfAttention:\n    def forward(self, x):\n"
              "        return scaled_dot_product_attention(x, x, x)\n")
    assert scan(source) == []


def test_findings_zero_the_part_of_the_function_they_are_in(tmp_path):
    source = ("import torch.nn.functional as F\n"
              "def scaled_dot_product_attention(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
              "def split_heads(x, h):\n    return x\n")
    zeroed = forbidden_parts(source, tmp_path)
    assert list(zeroed) == ["sdpa"] and "line 3" in zeroed["sdpa"][0]


def test_module_level_findings_zero_every_code_part(tmp_path):
    zeroed = forbidden_parts("from torch.nn import MultiheadAttention\n", tmp_path)
    assert set(zeroed) == {"sdpa", "heads", "masks", "mhsa", "block", "timing"}


def test_unparsable_source_yields_no_findings():
    assert scan("def f(:\n") == []


def test_non_utf8_bytes_are_refused():
    assert "not UTF-8" in scan("x = 'caf\u00e9'\n".encode("latin-1"))[0].message
    assert scan("x = 'caf\u00e9'\n".encode("utf-8")) == []


def test_every_valid_solution_and_mutant_passes_the_scan():
    """The allowlist and the dynamic-access rules refuse no style a correct solution uses."""
    from autograder.diagnosis import corpus

    sources = [p.read_text() for p in sorted((REPO / "corpus" / "valid").glob("*.py"))]
    sources += [p.read_text() for p in sorted((REPO / "examples" / "submissions").glob("*.py"))]
    sources += [m.source() for m in corpus.load_mutants()]
    assert [scan(s) for s in sources] == [[] for _ in sources]
