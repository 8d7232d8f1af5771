"""The static scan finds forbidden APIs and evasions by reading the source, and maps them to parts."""
import pytest

from autograder.core import rubric as rubric_file
from autograder.core.rubric import REPO
from autograder.integrity.static_check import FORBIDDEN, REVIEW, scan


def scanned(source: str, folder):
    """The grade after the grading pipeline's static-scan stage, for `source` as mhsa.py."""
    from types import SimpleNamespace

    from autograder.pipeline import grading

    path = folder / "mhsa.py"
    path.write_text(source)
    grade = grading.Grade("mhsa", "process", ("public",), source=path)
    return grading.static_scan(SimpleNamespace(rubric=rubric_file.load()), grade)


def test_reference_is_clean():
    assert scan((REPO / "reference" / "mhsa.py").read_text()) == []


# Plain uses of a library attention: the part scores 0 (static_check.FORBIDDEN).
@pytest.mark.parametrize("snippet, fragment", [
    ("import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
     "F.scaled_dot_product_attention"),
    ("from torch.nn import MultiheadAttention\n", "nn.MultiheadAttention"),
    ("import torch\ndef f(x):\n    return torch.nn.TransformerEncoderLayer(8, 2)(x)\n", "nn.TransformerEncoderLayer"),
    ("import torch.nn.functional as F\ndef f(x):\n    return getattr(F, 'scaled_dot_product_attention')(x, x, x)\n",
     "F.scaled_dot_product_attention"),
    ("import torch.nn.functional as F\ndef f(x):\n    return F.multi_head_attention_forward(x)\n",
     "F.multi_head_attention_forward"),
    # a module bound to another name is followed, not refused
    ("import torch\nm = torch.nn.functional\ndef f(x):\n    return m.multi_head_attention_forward(x)\n",
     "F.multi_head_attention_forward"),
    ("from torch.nn.attention.flex_attention import flex_attention\n", "torch.nn.attention.flex_attention"),
    ("import torch\ndef f(q):\n    return torch.nn.attention.flex_attention.flex_attention(q, q, q)\n",
     "torch.nn.attention.flex_attention"),
] + [(f"import torch\ndef f(q):\n    return torch.{name}(q, q, q)\n", name) for name in
     ("_native_multi_head_attention", "_transformer_encoder_layer_fwd", "_scaled_dot_product_attention_math",
      "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
      "_scaled_dot_product_fused_attention_overrideable", "_efficient_attention_forward", "_flash_attention_forward",
      "_fused_sdp_choice", "_triton_multi_head_attention", "_triton_scaled_dot_attention")])
def test_library_attention_is_forbidden(snippet, fragment):
    findings = scan(snippet)
    assert any(fragment in f.message and f.kind == FORBIDDEN for f in findings), findings


def test_the_scan_and_the_run_time_monitor_forbid_the_same_names():
    """The worker's monitor cannot import the scan (it runs beside student code, on torch alone): the
    two keep their own lists, and this holds them equal."""
    from autograder.integrity.static_check import ATTENTION_NAME_FRAGMENTS, FORBIDDEN_NAMES
    from autograder.isolation.guest import executor

    assert executor.FORBIDDEN_FUNCTIONS == ATTENTION_NAME_FRAGMENTS
    assert set(executor.FORBIDDEN_MODULES) == {name for name in FORBIDDEN_NAMES if name[0].isupper()}


# What the grader cannot decide: the grade is held for a person (static_check.REVIEW).
@pytest.mark.parametrize("snippet, fragment", [
    ("import torch\ndef f(x):\n    return torch.ops.aten.mm(x, x)\n", "torch.ops"),
    ("import sys\ndef f():\n    return sys.modules['executor']\n", "sys.modules"),
    ("def f():\n    return __import__('os')\n", "__import__"),
    ("import importlib\n", "importlib"),
    ("import ctypes\n", "ctypes"),
    ("import numpy\ndef f():\n    return numpy.ctypeslib.ctypes\n", "ctypes"),
    # What Python runs but a UTF-8 reading would take for a comment, and reaches without a name.
    ("# coding: utf-7\nimport torch\n#+AAo-import ctypes\n", "only UTF-8"),
    ("def f():\n    return __builtins__['open']\n", "__builtins__"),
    ("import torch\ndef f():\n    return getattr(torch, '_' + 'C')\n", "computed name"),
    ("import torch, operator\ndef f():\n    return operator.attrgetter('_' + 'C')(torch)\n", "computed name"),
    ("import torch\nfrom operator import attrgetter\ndef f():\n    return attrgetter('_C')(torch)\n", "torch._C"),
    ("from operator import attrgetter as pick\n", "another name"),
    ("import torch\ng = getattr\ndef f():\n    return g(torch, 'nn')\n", "getattr around as a value"),
    ("import torch\nm = torch\ndef f():\n    return m._C\n", "torch._C"),
    ("import torch\ndef f():\n    return vars(torch)\n", "vars"),
    ("def f(e):\n    return e.__traceback__.tb_frame.f_back.f_globals\n", "tb_frame"),
    ("def f(x):\n    return x.__class__.__subclasses__()\n", "__subclasses__"),
    ("def f(m):\n    return m.__dict__\n", "__dict__"),
    ("def f(g):\n    return g.__globals__\n", "__globals__"),
    ("from torch import _C\n", "torch._C"),
    ("from torch._C import DisableTorchFunction\n", "torch._C"),
    ("import torch\ndef f(q):\n    with torch._C._DisableTorchDispatch():\n        return q\n", "_DisableTorchDispatch"),
    ("from torch.utils._python_dispatch import _disable_current_modes\n", "_python_dispatch"),
    ("import torch\ndef f():\n    return getattr(torch._C, 'Disable' + 'TorchFunction')\n", "computed name"),
    ("x = 'DisableTorchFunction'\n", "switches torch's modes"),
    ("import torch\nclass T(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, *a):\n        pass\n",
     "__torch_function__"),
    ("import torch\ndef f():\n    return torch.hub.load('here', 'attention', source='local')\n", "torch.hub"),
    ("import torch\ndef f():\n    return torch.package.PackageImporter('x.pt')\n", "torch.package"),
    ("import torch\nlib = torch.library.Library('aten', 'IMPL')\n", "torch.library"),
    ("import sys\ndef f():\n    open('helper.py', 'w').write('x = 1')\n    sys.path.insert(0, '.')\n", "writes a file"),
    ("import pathlib, sys\npathlib.Path('helper.py').write_text('x = 1')\nsys.path.append('.')\n", "writes a file"),
    ("import sys\nfrom pathlib import Path\nPath('helper.py').open('w').write('x = 1')\nsys.path.append('.')\n",
     "writes a file"),
    ("import os\nfrom sys import path\nos.open('helper.py', os.O_WRONLY | os.O_CREAT)\npath.insert(0, '.')\n",
     "writes a file"),
    ("import sys, zipfile\nzipfile.ZipFile('data.bin', 'w').writestr('helper.py', 'x = 1')\nsys.path.insert(0, 'data.bin')\n",
     "writes a file"),
    ("open('helper.py', 'w').write('x = 1')\n__path__ = ['.']\n", "writes a file"),
    ("def f():\n    exec('x = 1')\n", "exec"),
    ("x = globals()['F']\n", "globals"),
    # code that never appears in the source: routes an outside tester found through allowed modules
    ("import torch\nunit = torch.jit.CompilationUnit('def f(x):\\n    return x')\n", "torch.jit"),
    ("import torch\nf = torch.jit.load(buffer)\n", "torch.jit"),
    ("import typing\nhints = typing.get_type_hints(f)\n", "get_type_hints"),
    ("import timeit\ntimeit.timeit('x = 1')\n", "code in a string"),
    ("import timeit\ntimeit.Timer(stmt='f()' + extra)\n", "code in a string"),
    ("ok = 'F' in globals(__builtins__)\n", "globals"),
    ("names = 'x' in globals().keys() or globals()\n", "globals"),
    ("import torch\ndef f():\n    for name in ('nn', '_C'):\n        getattr(torch, name)\n", "computed name"),
    ("import torch\ndef f():\n    for name in ('nn', 'fft'):\n        name = '_C'\n        getattr(torch, name)\n",
     "computed name"),
    ("import torch.nn.functional as F\ndef f(a):\n    if a not in ('relu', '_C'):\n        raise ValueError\n"
     "    return getattr(F, a)\n", "computed name"),
    ("import torch.nn.functional as F\ndef f(a):\n    if a not in ('relu', 'gelu'):\n        raise ValueError\n"
     "    a = 'scaled' + '_dot'\n    return getattr(F, a)\n", "computed name"),
])
def test_what_the_grader_cannot_decide_is_held_for_review(snippet, fragment):
    findings = scan(snippet)
    assert any(fragment in f.message and f.kind == REVIEW for f in findings), findings


@pytest.mark.parametrize("snippet", [
    "import time, random, os.path, sys, logging, warnings, json, threading, subprocess\n",
    "from __future__ import annotations\nfrom dataclasses import dataclass\nfrom typing import Optional\n",
    "import matplotlib.pyplot as plt\nfrom tqdm import tqdm\nimport numpy as np\n",
    "import torch\ntorch.manual_seed(0)\nprint('loaded')\n",
    "class A:\n    def __repr__(self):\n        return f'{self.__class__.__name__}(x)'\n",
    "def f():\n    pass\nif __name__ == '__main__':\n    f()\n",
    "import torch.nn.functional as F\ndef f(x, a):\n    if a not in ('relu', 'gelu'):\n        raise ValueError(a)\n"
    "    return getattr(F, a)(x)\n",
    "import torch\nclass M(torch.nn.Module):\n    def f(self):\n        return [m for m in self.modules()], "
    "getattr(self, '_cache', None), torch.stack([torch.zeros(1)])\n",
    "import sys\nsys.path.insert(0, '.')\nlogfile = open('notes.txt').read\n",
    "__all__ = ['scaled_dot_product_attention']\ndef scaled_dot_product_attention(q, k, v):\n    return q\n",
    "def f(x):\n    return super().__init__(), x.__class__.__qualname__, type(x).__module__\n",
    "class A:\n    def __repr__(self):\n        return f'{type(self).__name__}({vars(self)}, {self.__dict__})'\n",
    "class Block:\n    def __init__(self):\n        self.multi_head_attention = self.flash_attention_like = None\n",
    "class A:\n    def reset(self):\n        for name in ('q_proj', 'k_proj'):\n            getattr(self, name).reset()\n",
    "print(padding_mask([3, 1], 4) if 'padding_mask' in globals() else 'not yet')\n",
    "if 'model' not in locals():\n    model = None\n",
    "import timeit\nprint(timeit.timeit(lambda: sum(range(9)), number=3))\n",
    "import time\nLOG = 'mhsa_debug.log'\ndef log(msg):\n    with open(LOG, 'a') as f:\n        f.write(msg)\nlog(time.ctime())\n",
    "import torch\nfrom pathlib import Path\nPath('shapes.txt').write_text('ok')\ntorch.save({}, 'w.pt')\n",
    "import gc\nimport torch\ngc.collect()\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\n",
    "import numpy as np\nimport torch\nx = np.load('a.npy', allow_pickle=False)\nw = torch.load('w.pt', weights_only=True)\n",
    # The standard library's own reflection and storage, held before the worker refused library
    # attention at run time: saving weights with pickle, counting live tensors, listing members.
    "import pickle\nimport torch\nblob = pickle.dumps({'w': torch.zeros(2)})\nback = pickle.loads(blob)\n",
    "import gc\nimport torch\nlive = sum(torch.is_tensor(o) for o in gc.get_objects())\n",
    "import inspect\nimport torch\nmethods = inspect.getmembers(torch.nn.Linear, inspect.isfunction)\n",
    "import torch\nstate = torch.load('w.pt', weights_only=False)\n",
])
def test_honest_habits_are_neither_refused_nor_held(snippet):
    assert scan(snippet) == []


def test_the_scan_fails_closed():
    """An attribute chain deep enough that parsing it exhausts the grader's stack (the worker, fewer
    frames deep, compiles it): a finding for a person, never "no findings"."""
    findings = scan("import torch\nx = torch" + ".nn" * 3000 + "\n")
    assert [f.kind for f in findings] == [REVIEW] and "RecursionError" in findings[0].message


def test_the_students_own_function_of_the_same_name_is_allowed():
    source = ("def scaled_dot_product_attention(q, k, v):\n    return q\n"
              "class MultiHeadSelfAttention:\n    def forward(self, x):\n"
              "        return scaled_dot_product_attention(x, x, x)\n")
    assert scan(source) == []


def test_findings_zero_the_part_of_the_function_they_are_in(tmp_path):
    source = ("import torch.nn.functional as F\n"
              "def scaled_dot_product_attention(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
              "def split_heads(x, h):\n    return x\n")
    zeroed = scanned(source, tmp_path).forbidden
    assert list(zeroed) == ["sdpa"] and "line 3" in zeroed["sdpa"][0]


@pytest.mark.parametrize("source", [
    "from torch.nn import MultiheadAttention\n",
    "import torch\ncheck = torch.nn.MultiheadAttention(8, 2)  # a notebook cell comparing with torch\n",
    "import torch.nn.functional as F\ndef _attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
])
def test_a_library_attention_outside_the_graded_functions_holds_every_code_part(tmp_path, source):
    """A comparison the student made, or a cheat the graded code reaches later: the grader cannot
    tell, so a person decides; nothing is zeroed for it (the run-time monitor zeroes what it sees)."""
    grade = scanned(source, tmp_path)
    assert grade.forbidden == {}
    assert set(grade.held) == {"sdpa", "heads", "masks", "mhsa", "block", "timing"}
    assert all("outside the graded functions" in reasons[0] for reasons in grade.held.values())


@pytest.mark.parametrize("body", [
    "    ref = torch.nn.MultiheadAttention(8, 2)\n    open('shapes.txt', 'w').write('ok')\n",
    "    print(getattr(torch, name))\n",
])
def test_a_self_test_under_the_main_guard_is_not_the_submission(body):
    """`if __name__ == "__main__":` never runs while grading: what a self-test does there is no finding."""
    assert scan(f"import torch\nif __name__ == '__main__':\n{body}") == []


@pytest.mark.parametrize("source", [
    "__name__ = '__main__'\n",
    "import mhsa\nmhsa.__name__ = '__main__'\n",
    "import sys\nsetattr(sys.modules[x], '__name__', y)\n",
    "def f():\n    global __name__\n    __name__ = '__ma' + 'in__'\n",
    "x = '__main__'\n",
])
def test_a_main_guard_the_module_could_make_run_is_scanned(source):
    findings = scan(f"import torch\n{source}if __name__ == '__main__':\n    torch.nn.MultiheadAttention(8, 2)\n")
    assert any("nn.MultiheadAttention" in f.message and f.kind == FORBIDDEN for f in findings), findings


def test_review_findings_hold_the_parts_they_are_in_and_zero_nothing(tmp_path):
    grade = scanned("import torch\ndef split_heads(x, h):\n    return getattr(torch, '_' + 'C')\n", tmp_path)
    assert grade.forbidden == {} and list(grade.held) == ["heads"] and "line 3" in grade.held["heads"][0]


def test_unparsable_source_yields_no_findings():
    assert scan("def f(:\n") == []


def test_non_utf8_bytes_are_held():
    assert "not UTF-8" in scan("x = 'caf\u00e9'\n".encode("latin-1"))[0].message
    assert scan("x = 'caf\u00e9'\n".encode("latin-1"))[0].kind == REVIEW
    assert scan("x = 'caf\u00e9'\n".encode("utf-8")) == []


def test_every_valid_solution_and_mutant_passes_the_scan():
    """The allowlist and the dynamic-access rules refuse no style a correct solution uses."""
    from tools import corpus

    sources = [p.read_text() for p in sorted((REPO / "corpus" / "valid").glob("*.py"))]
    sources += [p.read_text() for p in sorted((REPO / "examples" / "submissions").glob("*.py"))]
    sources += [m.source() for m in corpus.load_mutants()]
    assert [scan(s) for s in sources] == [[] for _ in sources]
