"""Create this project's virtual environment with what pyproject.toml declares, at requirements.txt's pins.

    python3 setup_venv.py                      # .venv next to this file: grading and the public tests
    python3 setup_venv.py --extras course      # also an extra of pyproject.toml: course, cluster, report
                                               # or dev (all of them and the project's own checks)
    python3 setup_venv.py PATH [--extras ...]  # another environment: created if missing, else installed into

pyproject.toml says which packages each use needs (its dependencies and optional dependencies);
requirements.txt pins the version of each, and is passed to pip as constraints, so that it never adds
a package of its own. Running it again installs whatever either file has changed. It uses the standard
library only, so that any Python can run it before anything is installed, and stops with one line that
says what to do when this Python cannot make a virtual environment.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE / "pyproject.toml"
REQUIREMENTS = HERE / "requirements.txt"


def fail(message):
    sys.exit(f"setup_venv.py: {message}")


def required_python():
    """The oldest Python the project supports, as pyproject.toml's requires-python says."""
    found = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', PYPROJECT.read_text(), re.M)
    return int(found.group(1)), int(found.group(2))


def string_arrays(table: str) -> dict:
    """`key = ["...", ...]` entries of one TOML table, as {key: [strings]}. Python 3.10 has no TOML
    reader, and this runs before anything is installed; it reads the double-quoted strings, comments
    and commas that pyproject.toml's dependency lists use and refuses anything else
    (tests/test_declared_dependencies.py checks that it agrees with tomllib)."""
    arrays = {}
    for start in re.finditer(r'^([A-Za-z0-9_-]+)\s*=\s*\[', table, re.M):
        items, rest = [], table[start.end():]
        while True:
            token = re.match(r'\s*(?:#[^\n]*\s*)*("(?:[^"\\\n])*"|,|\])', rest)
            if token is None:
                raise ValueError(f"pyproject.toml: cannot read the list {start.group(1)} = [...]")
            rest = rest[token.end():]
            if token.group(1) == "]":
                break
            if token.group(1) != ",":
                items.append(token.group(1)[1:-1])
        arrays[start.group(1)] = items
    return arrays


def tables(text: str) -> dict:
    """The TOML text of each [table] of pyproject.toml, by its name."""
    parts = re.split(r'^\[([^\[\]\n]+)\]\s*$', text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def declared(extras=()) -> list:
    """The requirements that pyproject.toml declares for grading and for each of `extras`; an extra
    that names the project itself (dev = mhsa-assignment[course, ...]) brings those extras' in."""
    toml_tables = tables(PYPROJECT.read_text())
    name = re.search(r'^name\s*=\s*"([^"]+)"', toml_tables["project"], re.M).group(1)
    optional = string_arrays(toml_tables.get("project.optional-dependencies", ""))
    requirements, pending, seen = list(string_arrays(toml_tables["project"])["dependencies"]), list(extras), set()
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            fail(f"pyproject.toml declares no extra {extra!r}; it has {', '.join(optional)}")
        seen.add(extra)
        for requirement in optional[extra]:
            itself = re.fullmatch(rf"{re.escape(name)}\[([^\]]*)\]", requirement.strip())
            if itself:
                pending.extend(e.strip() for e in itself.group(1).split(","))
            else:
                requirements.append(requirement)
    return list(dict.fromkeys(requirements))


def interpreter(env):
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def create(env):
    try:
        import ensurepip  # noqa: F401  (Debian and Ubuntu ship it apart from Python, in python3.X-venv)
    except ImportError:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        fail(f"{sys.executable} cannot create a virtual environment (its ensurepip module is missing): "
             f"install it (Debian/Ubuntu: sudo apt-get install python{version}-venv) or run this with "
             "another Python")
    print(f"Creating a virtual environment in {env} with Python {sys.version.split()[0]}", flush=True)
    try:
        venv.EnvBuilder(with_pip=True).create(env)
    except (OSError, subprocess.CalledProcessError) as error:
        shutil.rmtree(env, ignore_errors=True)  # half made: the next run must not take it for done
        fail(f"could not create a virtual environment in {env}: {error}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", nargs="?", type=Path, default=HERE / ".venv", help="the environment (default: .venv)")
    parser.add_argument("--extras", default="", help="extras of pyproject.toml to install too, comma-separated")
    args = parser.parse_args()
    if sys.version_info[:2] < required_python():
        fail("this project needs Python {}.{} or newer; this is {}".format(
            *required_python(), sys.version.split()[0]))
    extras = [extra.strip() for extra in args.extras.split(",") if extra.strip()]
    requirements = declared(extras)
    env = args.env
    if not env.exists():
        create(env)
    python = interpreter(env)
    works = python.exists() and subprocess.run([str(python), "-c", ""]).returncode == 0
    if not works:
        fail(f"{env} exists but holds no working Python: delete it and run again")
    print(f"Installing what grading needs{' and the extras ' + ', '.join(extras) if extras else ''} into {env} "
          "(the first time takes a few minutes: PyTorch is large)", flush=True)
    installed = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                                "--constraint", str(REQUIREMENTS), *requirements])
    if installed.returncode != 0:
        fail(f"pip could not install pyproject.toml's requirements at {REQUIREMENTS.name}'s versions into {env} "
             "(its messages are above)")
    print(f"Ready: activate it with `source {env}/bin/activate` "
          f"(Windows: {env}\\Scripts\\activate), or run {python} directly.")


if __name__ == "__main__":
    main()
