"""The worker process: imports one submission, then carries out calls until its input closes.

Started by autograder.isolation.host.worker as `python -I worker_main.py REQ_FD RESP_FD SUBMISSION CONFIG_JSON`.
It reads requests and writes replies on its own pipes (student prints go to stdout/stderr, which the
grader drains and caps). Everything the student's code does happens here, never in the grader.
"""
import json
import os
import resource
import sys
import traceback
import types

WORKER_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, WORKER_DIR)  # `python -I` leaves it out

import torch  # noqa: E402  (imported before the audit hook: torch loads its libraries at import)

import confine  # noqa: E402
import executor  # noqa: E402
import refusal  # noqa: E402
import wire  # noqa: E402

BLOCKED_EVENTS = {
    "os.system": "running shell commands", "os.fork": "starting processes",
    "os.forkpty": "starting processes", "os.posix_spawn": "starting processes",
    "os.exec": "starting processes", "os.spawn": "starting processes",
    "subprocess.Popen": "starting processes", "pty.spawn": "starting processes",
    "os.kill": "signalling processes", "os.killpg": "signalling processes",
    "signal.pthread_kill": "signalling processes",
    "socket.__new__": "network access", "socket.connect": "network access",
    "socket.bind": "network access", "socket.sendto": "network access", "socket.sendmsg": "network access",
    "socket.getaddrinfo": "network access", "socket.gethostbyname": "network access",
}
# The worker's (and the worker template's) own modules: out of the submission's reach once it is loaded (see hide_worker).
WORKER_MODULES = ("executor", "refusal", "wire", "confine", "worker_main", "reaper", "template_main")
SUBMISSION_PATH = None
REFUSAL = None  # the worker's refusal of library attention (refusal.Refusal), judged by prepare()
READ_EVENTS = {"open", "os.listdir", "os.scandir", "os.chdir", "shutil.copyfile", "os.rename",
               "os.remove", "os.symlink", "os.link"}
# Events that change the filesystem at their path arguments: allowed inside the worker's own
# directory only (an "open" for writing counts too; see is_write).
WRITE_EVENTS = {"os.mkdir", "os.rmdir", "os.remove", "os.rename", "os.symlink", "os.link", "os.chmod",
                "os.chown", "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.lchmod",
                "shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree",
                "shutil.move", "shutil.rmtree", "shutil.make_archive", "shutil.unpack_archive",
                "os.mkfifo", "os.mknod"}
COPY_EVENTS = {"shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree"}  # (src, dst)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def main(execute=executor.execute):
    """`execute(module, request) -> result` answers each request (gpu_checks passes its timing session's)."""
    req_fd, resp_fd, submission = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    config = json.loads(sys.argv[4])
    set_limits(config)
    prepare()
    serve(req_fd, resp_fd, submission, config, execute)


def prepare():
    """What every worker does before it knows its submission; the worker template
    (template_main.py) does it once, and each child it forks starts from there."""
    torch.set_num_threads(1)
    warm_up()
    global REFUSAL
    REFUSAL = refusal.prepare(executor.note_refused, executor.FORBIDDEN_OPS, executor.FORBIDDEN_FUNCTIONS,
                              executor.library_attention_class, executor.library_label)
    sys.dont_write_bytecode = True  # `python -I` ignores PYTHONDONTWRITEBYTECODE


def serve(req_fd, resp_fd, submission, config, execute=executor.execute):
    """Confine this process, import the submission, then answer calls until the requests end."""
    source, failure = read_source(submission)
    confinement = confine_self(config)
    sys.addaudithook(audit_hook(config.get("denied_paths", []), config.get("write_dirs"),
                                [*config.get("write_dirs", ()), WORKER_DIR]))
    decode, encode, read_frame, write_frame = wire.decode, wire.encode, wire.read_frame, wire.write_frame
    sys.addaudithook(refusal.watch_code(REFUSAL, WORKER_DIR + os.sep, submission))
    hide_worker()
    if failure is None:
        module, failure = load_submission(source, submission)
    if failure is None and execute is executor.execute:  # a grading worker: gpu_checks' timing session
        executor.refuse_library_attention(refusal.start(REFUSAL))  # times torch's fused baseline too
    try:
        write_frame(resp_fd, encode(failure or {"status": "ready", "confinement": confinement}))
        if failure:
            return
        while True:
            try:
                request = decode(read_frame(req_fd))
            except EOFError:
                return
            write_frame(resp_fd, encode_reply(answer(module, request, execute), encode))
    except BrokenPipeError:
        # The grader hung up (it refused a reply, or the grade ended): a traceback here would reach the
        # captured output, as much of it as was written before the reaper's kill, different every run.
        return


def warm_up():
    """What torch imports lazily on a call's first use, imported here instead: the monitor's dispatch
    helpers, and autograd's first backward with given gradients (as executor._execute runs it), which
    imports torch.fx's symbolic shapes and sympy with them, most of a second. Done before the audit hook
    and under the import timeout rather than inside the first call's time limit; in the worker template,
    once for every worker forked from it rather than once per submission."""
    with executor.ShapeTrace(None), executor.ForbiddenApiMonitor():  # as executor._monitored stacks them
        x = torch.ones(1, requires_grad=True)
        torch.autograd.backward([x + 1], [torch.ones(1)])


def set_limits(config):
    memory = config.get("memory_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = config.get("cpu_seconds")
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    size = config.get("file_bytes")
    if size:  # a file written past this fails (SIGXFSZ is ignored, so write() returns EFBIG)
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def confine_self(config):
    """The folder's budget, Landlock, the privilege drop and seccomp (confine.py), in that order
    (Landlock forbids mounting; dropping capabilities needs them), each as far as this machine
    allows; what was applied, in words."""
    if not sys.platform.startswith("linux"):
        return [f"kernel confinement: Linux only (this is {sys.platform})"]
    done = []
    steps = [("landlock", lambda: confine.landlock([*config.get("read_paths", ()),
                                                     *confine.own_proc_entries(os.getpid())],
                                                    config.get("write_paths", ()))),
             ("capabilities", lambda: confine.drop_privileges(config.get("python_paths", ()), os.getcwd())),
             ("seccomp", lambda: confine.seccomp(bool(config.get("allow_threads"))))]
    if config.get("scratch_bytes"):
        steps.insert(0, ("scratch", lambda: confine.scratch(os.getcwd(), config["scratch_bytes"],
                                                            config.get("python_paths", ()))))
    for name, step in steps:
        try:
            outcome = step()
        except OSError as err:
            outcome = f"{name}: failed ({err.strerror})"
        done += outcome if isinstance(outcome, list) else [outcome]
    return done


def hide_worker():
    """Removes the worker's modules from where a submission could find them: its sys.modules entries
    (and __main__, this script), and its folder from sys.path, so that `import executor` finds
    nothing. The main loop keeps its own references to the functions it needs."""
    for name in WORKER_MODULES:
        sys.modules.pop(name, None)
    sys.modules["__main__"] = types.ModuleType("__main__")
    while WORKER_DIR in sys.path:
        sys.path.remove(WORKER_DIR)


def audit_hook(denied_paths, write_dirs=None, own_dirs=()):
    """A tripwire, not a wall (Python's audit hooks can be dodged from C); Landlock, seccomp and the
    sandbox are the walls.

    Denies reads of `denied_paths` (but never of `own_dirs`, the worker's folders, even when a
    denied path holds them: hiding /tmp must not hide the worker's folder in it), opening a folder
    that holds a denied path (its descriptor, as dir_fd, would reach inside it: the event does not
    carry dir_fd), relative paths that climb with "..", and, when `write_dirs` is given, any change
    to the filesystem outside them.
    """
    denied = tuple(os.path.realpath(p) for p in denied_paths)
    own = tuple(os.path.realpath(p) for p in own_dirs)
    writable = None if write_dirs is None else tuple(os.path.realpath(p) for p in write_dirs)

    def hook(event, args):
        if event in BLOCKED_EVENTS:
            raise PermissionError(f"the grader does not allow {BLOCKED_EVENTS[event]} ({event})")
        if event not in READ_EVENTS and event not in WRITE_EVENTS:
            return
        raw = [os.fsdecode(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        if any(not os.path.isabs(p) and ".." in p.split(os.sep) for p in raw):
            raise PermissionError("the grader does not allow relative paths that climb out with '..'")
        paths = [os.path.realpath(p) for p in raw]
        for path in paths if denied and event in READ_EVENTS else ():
            if _inside(path, own):
                continue
            if _inside(path, denied) or (event == "open" and any(_inside(d, (path,)) for d in denied)):
                raise PermissionError(f"the grader does not allow access to {path}")
        if writable is not None and (event in WRITE_EVENTS or is_write(event, args)):
            for path in paths[1:] if event in COPY_EVENTS else paths:
                if not _inside(path, writable) and path != os.devnull:
                    raise PermissionError(f"the grader does not allow writing to {path}: "
                                          "only the working directory is writable")

    return hook


def _inside(path, roots):
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def is_write(event, args):
    """An "open" that may change the file: args are (path, mode, flags), mode None for os.open."""
    if event != "open" or len(args) < 3:
        return False
    mode, flags = args[1], args[2]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & WRITE_FLAGS)


def read_source(path):
    """(the submission's text, None) or (None, the import failure): it must be UTF-8, the encoding
    the grader's static scan reads it in, whatever coding line it declares (a `# coding: utf-7`
    line would otherwise make Python run what the scan never saw)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as err:
        return None, {"status": "import_error", "type": "SyntaxError",
                      "message": f"mhsa.py is not UTF-8 text ({err.reason} at byte {err.start})", "traceback": ""}


def load_submission(source, path):
    """The submission as module `mhsa`, compiled from `source` (text: a coding line is ignored)."""
    global SUBMISSION_PATH
    SUBMISSION_PATH = path
    try:
        module = types.ModuleType("mhsa")
        module.__file__ = path
        sys.modules["mhsa"] = module
        exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)  # noqa: S102
        return module, None
    except BaseException as err:  # noqa: BLE001 - a submission may raise anything, SystemExit too
        return None, {"status": "import_error", **describe_exception(err)}


def answer(module, request, execute=executor.execute):
    try:
        reply = {"status": "ok", "result": execute(module, request)}
    except BaseException as err:  # noqa: BLE001
        return {"status": "raised", **describe_exception(err)}
    if isinstance(request, dict) and request.get("return_inputs"):
        # The very objects the submission was handed (execute passes them on as they are): the
        # grader compares them with its own copies, so a patched torch.equal in here changes nothing.
        reply["inputs"] = {"args": request.get("args", []), "kwargs": request.get("kwargs", {})}
    return reply


def encode_reply(reply, encode=wire.encode):
    """The reply as bytes; a result that cannot be sent (a tensor whose data cannot be read) is
    reported as an error of the call rather than crashing the worker."""
    try:
        return encode(reply)
    except BaseException as err:  # noqa: BLE001 - a student's object may fail in any way when read
        return encode({"status": "raised", "type": "TypeError",
                            "message": f"the result could not be sent back to the grader: "
                                       f"{type(err).__name__}: {str(err)[:500]}", "traceback": ""})


def describe_exception(err):
    frames = traceback.extract_tb(err.__traceback__)
    # The student's own frames only: torch's and the grader's internals say nothing about their code,
    # and an error with none of them (a function the submission does not define) has no "where" in it.
    student = [f for f in frames if f.filename == SUBMISSION_PATH]
    for frame in student:  # the private copy's path means nothing to the student and varies per run
        if frame.filename == SUBMISSION_PATH:
            frame.filename = "mhsa.py"
    return {
        "type": type(err).__name__,
        "message": confine.explain(err, str(err)[:2000]),  # a refusal of the sandbox named in words
        "traceback": "".join(traceback.format_list(student[-6:]))[:4000],
        "shapes": executor.shape_trace_of(err)[:2000],  # the shapes of the student's tensors up to the error
    }


if __name__ == "__main__":
    main()
