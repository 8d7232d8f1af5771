"""The Gradescope bundle inside a container like Gradescope's, run as Gradescope runs it: every upload
layout, the rubric's visibility and late settings, a memory limit smaller than the rubric's, and
root without bubblewrap. Most runs grade the stubs with the knowledge check answered: quick, and
the only points are the knowledge check's, so every figure below is known exactly."""
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from autograder.core import paths, toml
from autograder.runners import gradescope

STUBS = paths.ASSIGNMENT
KEY = paths.KNOWLEDGE_KEY
# The course's due date has passed, so the knowledge check is scored (before it, rubric.toml withholds it).
KNOWLEDGE_DUE_PASSED = {"[parts.knowledge]\n": "[parts.knowledge]\ndue = 2000-01-01\n"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return gradescope.build_bundle(tmp_path_factory.mktemp("bundle") / "autograder.zip")


@pytest.fixture
def answers(tmp_path) -> Path:
    """knowledge.py with every autograded answer right."""
    path = tmp_path / "answers.py"
    path.write_text("".join(f"{q}_ANSWER = {v!r}\n" for q, v in toml.loads(KEY.read_text()).items()))
    return path


def lay_out(bundle, tmp_path, files: dict, rubric_lines: dict | None = None, metadata: dict | None = None) -> Path:
    """ROOT/source (the bundle, with `rubric_lines` replacing rubric lines), ROOT/submission, ROOT/results."""
    root = gradescope.lay_out(bundle, tmp_path / "autograder", files, metadata)
    rubric = root / "source" / "rubric.toml"
    text = rubric.read_text()
    for old, new in (rubric_lines or {}).items():
        assert old in text, old
        text = text.replace(old, new, 1)
    rubric.write_text(text)
    return root


def run(root: Path, prefix=(), env=None) -> dict:
    env = gradescope.autograder_environment(root) | (env or {})
    done = subprocess.run([*prefix, "bash", str(root / "source" / "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def scored_rows(data):
    return [t for t in data["tests"] if "score" in t]


@pytest.mark.parametrize("layout", ["", "assignment/", "my-repo/"])
def test_knowledge_py_beside_mhsa_py_is_graded_in_every_upload_layout(bundle, tmp_path, answers, layout):
    root = lay_out(bundle, tmp_path, {f"{layout}mhsa.py": STUBS, f"{layout}knowledge.py": answers},
                   rubric_lines=KNOWLEDGE_DUE_PASSED)
    data = run(root)
    knowledge = data["extra_data"]["parts"]["knowledge"]
    assert knowledge["graded"] and knowledge["score"] == knowledge["max_score"] == 5.0
    assert data["score"] == 5.0 and data["extra_data"]["max_score"] == 95.0, "CPU-only grader: 95 for every route"
    assert round(sum(t["score"] for t in scored_rows(data)), 4) == data["score"]


def test_hidden_rows_wait_for_the_due_date_and_a_late_upload_loses_the_rubric_share(bundle, tmp_path, answers):
    root = lay_out(bundle, tmp_path, {"mhsa.py": STUBS, "knowledge.py": answers},
                   rubric_lines={'hidden_visibility = "visible"': 'hidden_visibility = "after_due_date"',
                                 "late_penalty_per_day = 0.0": "late_penalty_per_day = 0.1",
                                 'output_format = "text"': 'output_format = "md"', **KNOWLEDGE_DUE_PASSED},
                   metadata={"created_at": "2026-12-03T12:00:00.000000-08:00",
                             "assignment": {"due_date": "2026-12-02T00:00:00.000000-08:00"}})
    data = run(root)
    hidden = [t for t in data["tests"] if t["tags"][1:] == ["hidden"]]
    public = [t for t in data["tests"] if t["tags"][1:] == ["public"]]
    assert hidden and {t["visibility"] for t in hidden} == {"after_due_date"}
    assert public and {t["visibility"] for t in public} == {"visible"}
    part_rows = [t for t in data["tests"] if t["tags"][1:] == ["part"]]
    assert {t["tags"][0] for t in part_rows} >= {"sdpa", "heads", "masks", "mhsa", "block", "knowledge"}
    assert all("score" not in t for t in part_rows), "summary rows carry no points of their own"
    late = next(t for t in data["tests"] if t["name"] == "late penalty")
    assert late["score"] == -1.0 and "2 day(s) late" in late["output"], "1.5 days counts as 2: 20% of 5 points"
    assert data["score"] == 4.0 == round(sum(t["score"] for t in scored_rows(data)), 4)
    assert data["output_format"] == "md" and "Hidden tests and per-part results: shown after due date" in data["output"]


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/sys/fs/cgroup/memory", os.W_OK),
                    reason="needs root and a writable cgroup v1 memory hierarchy to build a small container")
def test_a_memory_bomb_in_a_small_container_still_gets_a_results_file(bundle, tmp_path):
    bomb = tmp_path / "bomb.py"
    bomb.write_text(STUBS.read_text() + (
        "\n\n_hoard = []\n\n\ndef causal_mask(seq_len, device=None, dtype=None):\n"
        "    while True:\n        _hoard.append(torch.ones(64 << 20, dtype=torch.uint8))\n"))
    root = lay_out(bundle, tmp_path, {"mhsa.py": bomb})
    group = Path("/sys/fs/cgroup/memory") / f"mhsa-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(3 << 30))
        data = run(root, prefix=("sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh"))
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            subprocess.run(["kill", "-9", pid], check=False)
        group.rmdir()
    assert data["extra_data"]["status"] == "graded", data["output"]
    assert any("memory limited to 1536 MiB" in note for note in data["extra_data"]["notes"])
    masks = data["extra_data"]["parts"]["masks"]
    assert masks["score"] == 0 and masks["max_score"] == 15.0


def test_as_root_without_bubblewrap_the_worker_cannot_read_the_hidden_tests(bundle, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the privilege drop happens only when grading runs as root, as on Gradescope")
    spy = tmp_path / "spy.py"
    spy.write_text(STUBS.read_text() + (
        "\n\nimport ctypes\n_libc = ctypes.CDLL(None)\n"
        f"_fd = _libc.open(b'{tmp_path}/autograder/source/tests_hidden/knowledge_key.toml', 0)\n"
        "_buf = ctypes.create_string_buffer(4096)\n"
        "print('SPY', _fd, _libc.read(_fd, _buf, 4096) if _fd >= 0 else -1, _buf.value[:400])\n"))
    root = lay_out(bundle, tmp_path, {"mhsa.py": spy})
    source = root / "source"
    subprocess.run(["chmod", "-R", "go-rwx", "reference", "tests_hidden", "rubric.toml"], cwd=source, check=True)
    os.chmod(tmp_path, 0o755)  # as on Gradescope: the worker's view up to /autograder/source is traversable
    data = run(root, env={"AUTOGRADER_NO_SANDBOX": "1"})
    assert data["extra_data"]["isolation"] == "process"
    text = json.dumps(data)
    assert "SPY -1" in data["extra_data"]["printed_output"], data["extra_data"]["printed_output"]
    assert "Q1 = " not in text, "the key's text reached the results"
    assert data["score"] == 0
