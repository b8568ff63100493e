"""Fresh interpreters without the cost of importing pipesim in each: :class:`Interpreters`.

The docs tests (tests/test_usage.py, tests/test_doc_blocks.py) run every ``pipesim`` command and
every docs block in a process of its own, as a reader would. Most of a short command's CPU was the
import of pipesim (about 0.7 s). :data:`SERVER` imports it once and forks a child per request; the
child takes the caller's stdio, directory, environment and argv, runs the console script's body
(``pipesim_entry.main``) or ``python -c CODE ARGS``, and exits as that interpreter would, its exit
functions and all. Nothing else is preloaded, so a block that forgets an import still fails, and
names never leak between requests. conftest.py's module-scoped ``interpreters`` fixture gives each
test module (and so each pytest-xdist worker) its own server, at a random address in Linux's
abstract socket namespace."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


SERVER = """
import json, os, select, signal, socket, sys
import pipesim  # what a fresh `pipesim` imports first (and each block that imports from it); nothing more

listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind("\\0" + sys.argv[1])  # Linux's abstract namespace: no file
listener.listen(64)
wake, woken = os.pipe()
os.set_blocking(woken, False)
signal.set_wakeup_fd(woken)
signal.signal(signal.SIGCHLD, lambda *_: None)
children = {}  # a running child's connection: its pid
print("ready", flush=True)
while True:
    ready = select.select([listener, wake, sys.stdin, *children], [], [])[0]
    if sys.stdin in ready:  # closed: the tests are done
        for pid in children.values():
            os.kill(pid, signal.SIGKILL)
        sys.exit(0)
    if wake in ready:
        os.read(wake, 4096)
        while children and (done := os.waitpid(-1, os.WNOHANG))[0]:
            conn = next(c for c, pid in children.items() if pid == done[0])
            del children[conn]
            try:
                conn.send(str(os.waitstatus_to_exitcode(done[1])).encode())
            except OSError:
                pass
            conn.close()
    for conn in [c for c in ready if c in children]:  # the caller went away (its time ran out)
        os.kill(children[conn], signal.SIGKILL)
    if listener in ready:
        conn = listener.accept()[0]
        message, fds = socket.recv_fds(conn, 1 << 20, 3)[:2]
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            break
        children[conn] = pid
        for fd in fds:
            os.close(fd)
# the child: a fresh interpreter once it has imported pipesim, with the caller's stdio, directory,
# environment and argv
signal.set_wakeup_fd(-1)
signal.signal(signal.SIGCHLD, signal.SIG_DFL)
for sock in (listener, conn, *children):
    sock.close()
os.close(wake), os.close(woken)
for fd, theirs in enumerate(fds):
    os.dup2(theirs, fd)
    os.close(theirs)
request = json.loads(message)
os.chdir(request["cwd"])
os.environ.clear()
os.environ.update(request["env"])
del wake, woken, ready, listener, conn, children, pid, fds, message, fd, theirs, sock
argv = request.pop("argv")
if argv[0] == "pipesim":  # the console script's body (.venv/bin/pipesim)
    from pipesim_entry import main

    sys.argv = argv
    sys.exit(main())
sys.argv = ["-c", *argv[2:]]  # python -c CODE ARGS
exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
"""
"""Forks a fresh interpreter per request (:class:`Interpreters`): it imports pipesim once; each
child exits as that interpreter would, its exit functions and all."""

CLIENT = """
import json, os, signal, socket, sys

server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
server.connect(ADDRESS)
argv = ["pipesim", *sys.argv[1:]]
request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
socket.send_fds(server, [json.dumps(request).encode()], [0, 1, 2])
status = int(server.recv(64) or b"-9")
if status < 0:  # killed by a signal: so is this process
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
"""
"""The ``pipesim`` a bash block finds on its PATH: it hands its argv, directory, environment and
stdio to the server and exits with the child's status (standard library only, ``python -IS``)."""


class Interpreters:
    """A :data:`SERVER` of fresh interpreters for one module's tests (one a pytest-xdist worker)."""

    def __init__(self) -> None:
        name = f"pipesim-tests-{uuid.uuid4().hex}"
        self.address = f"\0{name}"  # the server's, in Linux's abstract namespace: no file
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, name],
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's packages, from any directory
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def shim(self, bin_dir: Path) -> None:
        """Write ``bin_dir/pipesim``, the :data:`CLIENT`."""
        bin_dir.mkdir(exist_ok=True)
        shim = bin_dir / "pipesim"
        shim.write_text(f"#!{sys.executable} -IS\nADDRESS = {self.address!r}\n{CLIENT}")
        shim.chmod(0o755)

    def run(self, argv: list[str], cwd: Path, timeout: float) -> tuple[int | None, str, str]:
        """Run ``argv`` (``["pipesim", ...]`` or ``["-c", CODE, ...]``) in a fresh child in ``cwd``:
        its exit status (None when it ran past ``timeout`` and was killed), stdout and stderr."""
        with (
            open(os.devnull) as stdin,
            open(cwd / f".out-{os.getpid()}", "w+") as out,
            open(cwd / f".err-{os.getpid()}", "w+") as err,
            socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as server,
        ):
            os.unlink(out.name), os.unlink(err.name)
            server.connect(self.address)
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            request = {"argv": argv, "cwd": str(cwd), "env": env}
            socket.send_fds(
                server, [json.dumps(request).encode()], [stdin.fileno(), out.fileno(), err.fileno()]
            )
            ready = select.select([server], [], [], timeout)[0]
            status = int(server.recv(64)) if ready else None  # closing the socket kills the child
            out.seek(0), err.seek(0)
            return status, out.read(), err.read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
