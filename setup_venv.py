"""Create this project's virtual environment and install the pinned requirements into it.

    python3 setup_venv.py            # .venv next to this file, made with the Python that runs this
    python3 setup_venv.py PATH       # another environment: created if missing, else installed into

Running it again installs whatever requirements.txt has changed. It uses the standard library only,
so that any Python can run it before anything is installed, and stops with one line that says what
to do when this Python cannot make a virtual environment.
"""
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"


def fail(message):
    sys.exit(f"setup_venv.py: {message}")


def required_python():
    """The oldest Python the project supports, as pyproject.toml's requires-python says."""
    pyproject = (HERE / "pyproject.toml").read_text()
    found = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', pyproject, re.M)
    return int(found.group(1)), int(found.group(2))


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
    if sys.version_info[:2] < required_python():
        fail("this project needs Python {}.{} or newer; this is {}".format(
            *required_python(), sys.version.split()[0]))
    env = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / ".venv"
    if not env.exists():
        create(env)
    python = interpreter(env)
    works = python.exists() and subprocess.run([str(python), "-c", ""]).returncode == 0
    if not works:
        fail(f"{env} exists but holds no working Python: delete it and run again")
    print(f"Installing the pinned requirements into {env} (the first time takes a few minutes: "
          "PyTorch is large)", flush=True)
    installed = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check",
                                "-r", str(REQUIREMENTS)])
    if installed.returncode != 0:
        fail(f"pip could not install {REQUIREMENTS.name} into {env} (its messages are above)")
    print(f"Ready: activate it with `source {env}/bin/activate` "
          f"(Windows: {env}\\Scripts\\activate), or run {python} directly.")


if __name__ == "__main__":
    main()
