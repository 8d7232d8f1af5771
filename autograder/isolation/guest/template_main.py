"""The worker template: a pristine worker, torch imported and no student code, that forks each worker.

It has imported torch and the executor, and nothing of any student, and forks one child per worker a
grade asks for (autograder/isolation/host/worker_template.py).

Started by autograder.isolation.host.worker_template, once per grader slot or lone grade, exactly as
a worker is (under a reaper, inside the same bubblewrap command or as the same user) as
`python -I -u template_main.py CONTROL_FD`. CONTROL_FD is a Unix socket (SOCK_SEQPACKET) to the
grader. The template first says whether it can serve ({"ready": true} or {"refused": why}), asking
the kernel before it imports torch, so that a template refused here costs its grader no import;
then each message is one worker to start: a JSON object (its folder, submission, configuration and
environment) carrying five descriptors (SCM_RIGHTS): the worker's request and reply pipes, its
output pipe, its lifeline and a socket on which the worker's supervisor reports.

For each, the template forks a supervisor, which runs the reaper's supervision (reaper.supervise:
a child subreaper that kills everything when the lifeline closes) around a second fork, the worker.
The worker closes every descriptor but its own pipes, takes its own folder (a fresh tmpfs in a
mount namespace of its own), its limits, Landlock, the privilege drop and seccomp (worker_main.serve,
confine.py), exactly as a spawned worker does, and only then reads the submission. The supervisor
tells the grader it started ({"started": true}: the grader reads its pid from the message's
credentials, translated by the kernel into the grader's PID namespace) and, at the end, the worker's
wait status ({"status": N}). Between the two, the worker itself says it is set up ({"set_up": true})
once it stands in its folder with its limits, before it reads the submission: a worker that fails
before that is the template's failure, never the student's, and the grader restarts the template and
spawns that worker instead (worker_template.py).

The template runs no student code and must stay single-threaded: a fork copies only the calling
thread, and torch's OpenMP pool is not fork-safe. It never runs a torch operation that could start
one (one thread: OMP_NUM_THREADS=1 and torch.set_num_threads(1)), and checks before each fork.
"""
import atexit
import json
import os
import random
import signal
import socket
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `python -I` leaves it out

import confine  # noqa: E402
import reaper  # noqa: E402

MAX_REQUEST_BYTES = 1 << 20
FDS_PER_WORKER = 5


def main():
    control = socket.socket(fileno=int(sys.argv[1]))
    refusal = why_not_fork()
    if refusal is None:
        import worker_main  # torch, the executor and the monitor: only for a template that can serve

        worker_main.prepare()
        if thread_count() != 1:
            refusal = f"importing torch started {thread_count()} threads: forking would be unsafe"
    control.send(json.dumps({"refused": refusal} if refusal else {"ready": True}).encode())
    if refusal:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors report to the grader themselves
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, MAX_REQUEST_BYTES, FDS_PER_WORKER)
        except ConnectionError:
            return
        if not data:
            return  # the grader let go of the template
        threads = thread_count()
        if threads != 1:
            print(f"worker template: {threads} threads, forking is unsafe; stopping", file=sys.stderr)
            return
        if len(fds) == FDS_PER_WORKER and os.fork() == 0:
            supervise_worker(json.loads(data), *fds)
        for fd in fds:
            os.close(fd)


def why_not_fork():
    """Why this template cannot give each child what a spawned worker has, as the kernel says before
    torch is imported; None when it can. A child's writes are kept to its own folder by Landlock (at
    the sandbox level a spawned worker has a /tmp of its own; the template's children share one they
    cannot write to), and its folder is a tmpfs of its own only with a mount namespace."""
    if not sys.platform.startswith("linux"):
        return f"kernel confinement is Linux only (this is {sys.platform})"
    if confine.landlock_abi() < 1:
        return "no Landlock on this kernel: a child's writes outside its folder could reach the next"
    probe = os.fork()
    if probe == 0:
        try:
            confine.enter_mount_namespace()
        except OSError:
            os._exit(1)
        os._exit(0)
    if os.waitstatus_to_exitcode(os.waitpid(probe, 0)[1]) != 0:
        return "no mount namespace can be made here: a child's folder could not be a tmpfs of its own"
    return None


def thread_count():
    return len(os.listdir("/proc/self/task"))


def supervise_worker(request, req_fd, resp_fd, out_fd, lifeline, status_fd):
    """The supervisor (never returns): reaps the worker and everything it starts, then reports."""
    code = 1
    try:
        os.setsid()  # a session of its own, as a spawned worker's reaper has: the grader's last sweep
        report = socket.socket(fileno=status_fd)
        report.send(json.dumps({"started": True}).encode())
        status = reaper.supervise(lifeline, lambda: run_worker(request, req_fd, resp_fd, out_fd, status_fd),
                                  remove=request["workdir"], keep=(status_fd,))
        report.send(json.dumps({"status": status}).encode())
        code = 0
    except BaseException:  # noqa: BLE001 - whatever happens, this process must not return into the template's loop
        traceback.print_exc()
    finally:
        os._exit(code)


def run_worker(request, req_fd, resp_fd, out_fd, status_fd):
    """The worker (never returns): what a spawned worker_main does, from a fresh fork of the template."""
    import torch  # noqa: PLC0415 - imported by main() before any fork: these only name them here
    import worker_main  # noqa: PLC0415

    code = 1
    try:
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        reaper.close_other_fds(keep=(req_fd, resp_fd, status_fd))  # the template's socket, the supervisor's lifeline
        os.chdir(request["workdir"])
        os.environ.update(request["env"])
        # Seeded anew as in a freshly started Python, where both are random: not the state every
        # child copies from the template
        random.seed()
        torch.seed()
        # A spawned worker's command line (worker_main.main): a submission that reads sys.argv sees
        # what it would see in a worker of its own, not the template's
        sys.argv = [worker_main.__file__, str(req_fd), str(resp_fd), request["submission"], json.dumps(request["config"])]
        worker_main.set_limits(request["config"])
        with socket.socket(fileno=status_fd) as report:
            report.send(json.dumps({"set_up": True}).encode())
        worker_main.serve(req_fd, resp_fd, request["submission"], request["config"])
        code = 0
    except BaseException:  # noqa: BLE001 - reported on its output, as an uncaught error in a worker is
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # a spawned worker's interpreter would run them at its exit
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    main()
