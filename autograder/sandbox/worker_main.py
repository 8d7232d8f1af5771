"""The worker process: imports one submission, then carries out calls until its input closes.

Started by autograder.worker as `python -I worker_main.py REQ_FD RESP_FD SUBMISSION CONFIG_JSON`.
It reads requests and writes replies on its own pipes (student prints go to stdout/stderr, which the
grader drains and caps). Everything the student's code does happens here, never in the grader.
"""
import json
import os
import resource
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `python -I` leaves it out

import torch  # noqa: E402  (imported before the audit hook: torch loads its libraries at import)

import executor  # noqa: E402
import wire  # noqa: E402

BLOCKED_EVENTS = {
    "os.system": "running shell commands", "os.fork": "starting processes",
    "os.forkpty": "starting processes", "os.posix_spawn": "starting processes",
    "os.exec": "starting processes", "os.spawn": "starting processes",
    "subprocess.Popen": "starting processes", "pty.spawn": "starting processes",
    "socket.connect": "network access", "socket.bind": "network access",
    "socket.sendto": "network access",
}
SUBMISSION_PATH = None
PATH_EVENTS = {"open", "os.listdir", "os.scandir", "os.chdir", "shutil.copyfile", "os.rename",
               "os.remove", "os.symlink", "os.link"}


def main():
    req_fd, resp_fd, submission = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    config = json.loads(sys.argv[4])
    set_limits(config)
    torch.set_num_threads(1)
    sys.addaudithook(audit_hook(config.get("denied_paths", [])))
    module, failure = load_submission(submission)
    wire.write_frame(resp_fd, wire.encode(failure or {"status": "ready"}))
    if failure:
        return
    while True:
        try:
            request = wire.decode(wire.read_frame(req_fd))
        except EOFError:
            return
        wire.write_frame(resp_fd, wire.encode(answer(module, request)))


def set_limits(config):
    memory = config.get("memory_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = config.get("cpu_seconds")
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def audit_hook(denied_paths):
    """A tripwire, not a wall (Python's audit hooks can be dodged from C); the sandbox is the wall."""
    denied = tuple(os.path.realpath(p) for p in denied_paths)

    def hook(event, args):
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"the grader does not allow {BLOCKED_EVENTS[event]} ({event})")
        if denied and event in PATH_EVENTS and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if any(path == d or path.startswith(d + os.sep) for d in denied):
                raise PermissionError(f"the grader does not allow access to {path}")

    return hook


def load_submission(path):
    import importlib.util

    global SUBMISSION_PATH
    SUBMISSION_PATH = path
    try:
        spec = importlib.util.spec_from_file_location("mhsa", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["mhsa"] = module
        spec.loader.exec_module(module)
        return module, None
    except BaseException as err:  # noqa: BLE001 - a submission may raise anything, SystemExit too
        return None, {"status": "import_error", **describe_exception(err)}


def answer(module, request):
    try:
        return {"status": "ok", "result": executor.execute(module, request)}
    except BaseException as err:  # noqa: BLE001
        return {"status": "raised", **describe_exception(err)}


def describe_exception(err):
    frames = traceback.extract_tb(err.__traceback__)
    student = [f for f in frames if not f.filename.endswith(("executor.py", "worker_main.py"))]
    for frame in student:  # the private copy's path means nothing to the student and varies per run
        if frame.filename == SUBMISSION_PATH:
            frame.filename = "mhsa.py"
    return {
        "type": type(err).__name__,
        "message": str(err)[:2000],
        "traceback": "".join(traceback.format_list(student[-6:]))[:4000],
    }


if __name__ == "__main__":
    main()
