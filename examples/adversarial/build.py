"""The adversarial corpus: each case is a base mhsa.py (the reference, or the stubs) with the code of
cases/<name>.py appended, so that it differs from a known grade by exactly one behaviour.

`python examples/adversarial/build.py OUT` writes every case as OUT/<name>.py, ready for
`python -m autograder grade OUT --batch --out GRADES`; tests/test_adversarial.py builds the same
sources and checks each grade against manifest.toml.
"""
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))  # also when run as a script

from autograder.core import toml  # noqa: E402

BASES = {"reference": REPO / "reference" / "mhsa.py", "stubs": REPO / "assignment" / "mhsa.py"}


@dataclass(frozen=True)
class Case:
    name: str
    base: str
    loses: tuple | str  # rubric parts, or "all"
    message: str
    process: bool
    held: str = ""      # a fragment of why the grade is held for review, when it is
    prepend: str = ""   # lines put before the base (a coding line must be in the first two)
    call_timeout_s: float | None = None  # a shorter call limit where every call runs out of time
    import_timeout_s: float | None = None  # a shorter import limit where the import never ends

    def source(self) -> str:
        snippet = (HERE / "cases" / f"{self.name}.py").read_text()
        return f"{self.prepend}{BASES[self.base].read_text()}\n\n# ---- adversarial case: {self.name} ----\n{snippet}"


def cases() -> list[Case]:
    manifest = toml.loads((HERE / "manifest.toml").read_text())["cases"]
    found = sorted(p.stem for p in (HERE / "cases").glob("*.py"))
    if sorted(manifest) != found:
        raise ValueError(f"manifest.toml and cases/ disagree: {sorted(set(manifest) ^ set(found))}")
    return [Case(name, spec["base"], spec["loses"] if spec["loses"] == "all" else tuple(spec["loses"]),
                 spec["message"], bool(spec.get("process", False)), spec.get("held", ""),
                 spec.get("prepend", ""), spec.get("call_timeout_s"), spec.get("import_timeout_s"))
            for name, spec in manifest.items()]


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for case in cases():
        target = out / f"{case.name}.py"
        target.write_text(case.source())
        written.append(target)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/adversarial/build.py OUT")
    for path in build(Path(sys.argv[1])):
        print(path)
