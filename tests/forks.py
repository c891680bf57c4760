"""Child Pythons forked from a server that has imported TensorFlow once, rather than each
importing it again (seconds of CPU per child on a 2-core machine).

`Forked` is a `subprocess.Popen` for a `[sys.executable, "-c", CODE, *args]` or
`[sys.executable, "-m", MODULE, *args]` command whose process is a fork of this process's
server (`SERVER`) rather than a new interpreter: it gets the same pipes, working folder,
environment and `sys.argv`, runs the code as `python -c`/`-m` would, and is waited for,
signalled and killed by its pid as any child is. `run` is `subprocess.run` over it.

A fork is not a new interpreter in every way, so a child that needs one keeps one
(`subprocess.Popen`, `tests.children.Child`): one whose test checks what is imported (no
TensorFlow) or blocks imports, or what the interpreter prints as it starts (TensorFlow's
lines come at its import, which the server made); one that starts processes of its own (a
fork of a process that has imported TensorFlow is not one a user has: the loader's worker
processes, multiprocessing) or handles signals; one that imports a framework that is not to
meet TensorFlow in a process (torch, jax); and one whose test checks how an interpreter
ends (a fork leaves out the teardown of every module). `needs_own_interpreter` tells these
from a child's code where the code says it (`OWN_INTERPRETER`); a test that knows more
chooses itself. The server reads the environment as it imports TensorFlow and TFDS, so each
environment that differs in what is read then (`IMPORT_TIME`) gets a server of its own.

The servers are this process's (an xdist worker's), each started at its first child and
ended with the process.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tests.children import TIMEOUT_S, Child

# What in a child's code makes it need an interpreter of its own (see above).
OWN_INTERPRETER = re.compile(
    r"\bsys\.modules\b|\bmeta_path\b|\bsubprocess\b|\bmultiprocessing\b|\bnum_workers\b|"
    r"\bsignal\b|\batexit\b|\btorch|\bjax\b|\bflax\b"
)


def needs_own_interpreter(code: str) -> bool:
    return OWN_INTERPRETER.search(code) is not None


# The server: imports what most children import, then for each connection (the child's
# stdin, stdout and stderr, then a JSON line: argv, folder, environment) forks a child
# that runs the command, answers its pid, and once it has ended its wait status. The child
# ends as an interpreter does (it waits for its threads, runs its atexit functions, exits 1
# after printing an uncaught exception, and with SystemExit's code) but leaves out the
# teardown of every module: in a fork, that teardown writes to every page the server holds,
# for seconds. The server ends when its stdin closes (this process ended).
SERVER = """
import atexit, gc, io, json, os, runpy, signal, socket, sys, tempfile, threading
import tensorflow, tensorflow_datasets
gc.freeze()  # what the imports made: not scanned (and so not copied) by a child's collector

def uncaught():  # prints the exception being handled as an interpreter does (not `run`)
    kind, value, traceback = sys.exc_info()
    sys.excepthook(kind, value, traceback.tb_next)

def run(argv):
    try:
        if argv[1] == "-c":
            sys.argv = ["-c", *argv[3:]]
            exec(compile(argv[2], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv, sys.path[0] = [argv[2], *argv[3:]], os.getcwd()
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        uncaught()
        return -signal.SIGINT
    except BaseException:
        uncaught()
        return 1
    return 0

def child(fds, request):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # What the server's imports computed once from its own environment or state, computed
    # again here as a new interpreter would: the temporary folder (TMPDIR), numpy's seed.
    tempfile.tempdir = None
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    # Streams of their own, buffered as an interpreter's on pipes (the server's may hold
    # what it read or wrote).
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))

    def stream(fd, mode, **options):
        raw = io.FileIO(fd, mode, closefd=False)
        if unbuffered and mode == "w":
            return io.TextIOWrapper(raw, write_through=True, **options)
        buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        return io.TextIOWrapper(buffered, **options)

    sys.stdin, sys.stdout = stream(0, "r"), stream(1, "w")
    sys.stderr = stream(2, "w", line_buffering=True, errors="backslashreplace")
    status = run(request["argv"])
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if status < 0:  # ended by a signal, as an interpreter that a Ctrl-C stopped is
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)

def report(conn, pid):
    status = os.waitpid(pid, 0)[1]
    conn.sendall(f"{status}\\n".encode())
    conn.close()

def end_with_stdin():
    while os.read(0, 4096):
        pass
    os._exit(0)

server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen(64)
threading.Thread(target=end_with_stdin, daemon=True).start()
os.write(1, b"ready\\n")
while True:
    conn, _ = server.accept()
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    request = json.loads(conn.makefile("rb").readline())
    pid = os.fork()
    if pid == 0:
        server.close()
        conn.close()
        child(fds, request)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\\n".encode())
    threading.Thread(target=report, args=(conn, pid), daemon=True).start()
"""

# What TensorFlow, TFDS and the interpreter may read from the environment as the server
# starts (TFDS's default data dir from HOME and TFDS_DATA_DIR, TensorFlow's logging, and the
# settings of its gs:// client, which it makes as it loads: retries, CA bundle, token):
# children whose environment differs there are forked from a server started with theirs. The
# rest of a server's environment is this process's (never a child's, such as its proxy).
IMPORT_TIME = ("HOME", "TFDS_DATA_DIR", "CURL_CA_BUNDLE", "NO_GCE_CHECK")
IMPORT_TIME_PREFIXES = ("PYTHON", "TF_", "CUDA", "XLA_", "GCS_", "GOOGLE_")


def _import_time(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in IMPORT_TIME or k.startswith(IMPORT_TIME_PREFIXES)}


# The folder the servers' own folders go in: the test run's temporary folder (set by
# tests/conftest.py), so that a worker that ends without running its atexit functions leaves
# nothing behind outside it. A socket's path is at most 107 bytes, so a longer one is not used.
folder_base: Path | None = None


class _Server:
    """One server (see SERVER), for one import-time environment."""

    def __init__(self, env: dict[str, str]):
        base = folder_base if folder_base and len(os.fspath(folder_base)) <= 64 else None
        self.folder = Path(tempfile.mkdtemp(prefix="fork-server-", dir=base))
        self.address = os.fspath(self.folder / "socket")
        self.log = self.folder / "server.err"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SERVER, self.address],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self.folder,
            )
        # Its start (importing TensorFlow) is given as long as a child's run.
        ready = select.select([self.process.stdout], [], [], TIMEOUT_S)[0]
        if not ready or self.process.stdout.readline() != b"ready\n":
            self.process.kill()
            raise AssertionError(f"the fork server did not start: {self._log()}")

    def _log(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def fork(self, argv: list[str], cwd: str, env: dict[str, str], fds) -> tuple:
        """Asks for a child: (the connection that gives its wait status once it has ended,
        that connection's reader, its pid)."""
        conn = socket.socket(socket.AF_UNIX)
        conn.settimeout(TIMEOUT_S)
        try:
            conn.connect(self.address)
            socket.send_fds(conn, [b"F"], list(fds))
            conn.sendall(json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode() + b"\n")
            reader = conn.makefile("rb")
            line = reader.readline()
        except OSError as error:
            conn.close()
            raise AssertionError(f"the fork server failed ({error}): {self._log()}") from None
        if not line:
            conn.close()
            raise AssertionError(f"the fork server ended: {self._log()}")
        conn.settimeout(None)  # its wait status comes when it ends: the waits set their own
        return conn, reader, int(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(60)
        shutil.rmtree(self.folder, ignore_errors=True)


_servers: dict[tuple, _Server] = {}
_servers_lock = threading.Lock()


def _server_for(env: dict[str, str]) -> _Server:
    wanted = _import_time(env)
    key = tuple(sorted(wanted.items()))
    with _servers_lock:
        if key not in _servers:
            if not _servers:
                atexit.register(_close_servers)
            own = {k: v for k, v in os.environ.items() if k not in _import_time(os.environ)}
            _servers[key] = _Server({**own, **wanted})
        return _servers[key]


def _close_servers() -> None:
    for server in _servers.values():
        server.close()


class Forked(subprocess.Popen):
    """A `subprocess.Popen` of `[sys.executable, "-c"|"-m", ...]` whose process is a fork of
    a server that has imported TensorFlow (see the module's docstring for which children
    may be forks). `cwd` and `env` as Popen's (env: this environment if not given)."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                       c2pwrite, errread, errwrite, *rest):  # fmt: skip
        args = [os.fspath(a) for a in args]
        if args[:1] != [sys.executable] or len(args) < 3 or args[1] not in ("-c", "-m"):
            raise ValueError(f"a fork runs `{sys.executable} -c|-m ...`, not {args!r}")
        env = {os.fsdecode(k): os.fsdecode(v) for k, v in (env or os.environ).items()}
        fds = (p2cread, c2pwrite, errwrite)
        fds = [fd if fd != -1 else default for fd, default in zip(fds, (0, 1, 2), strict=True)]
        try:
            self._conn, self._reader, self.pid = _server_for(env).fork(
                args, os.fspath(cwd or os.getcwd()), env, fds
            )
        finally:
            # The child's ends of the pipes are the child's now (Popen's own would close them).
            for fd in (p2cread, c2pwrite, errwrite):
                if fd != -1 and fd not in (p2cwrite, c2pread, errread):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            # Popen's /dev/null (for a DEVNULL stream), unless the loop above closed it.
            if hasattr(self, "_devnull") and self._devnull not in (p2cread, c2pwrite, errwrite):
                os.close(self._devnull)
        self._child_created = True

    def _status(self, timeout: float | None) -> int | None:
        """Its wait status, once it has ended within `timeout` (None: as long as it takes)."""
        if timeout is not None and not select.select([self._conn], [], [], max(0, timeout))[0]:
            return None
        line = self._reader.readline()
        self._conn.close()
        if not line:
            raise AssertionError("the fork server ended before its child")
        return int(line)

    def _internal_poll(self, _deadstate=None, **_):
        if self.returncode is None:
            status = self._status(0)
            if status is not None:
                self._handle_exitstatus(status)
        return self.returncode

    def _wait(self, timeout):
        if self.returncode is None:
            status = self._status(timeout)
            if status is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._handle_exitstatus(status)
        return self.returncode


class ForkedChild(Forked, Child):
    """A `tests.children.Child` (every read of its output has a timeout) that is a fork."""


def run(args, *, timeout: float = TIMEOUT_S, capture_output: bool = False, **kwargs):
    """`subprocess.run(args, ...)` with the child a fork (`Forked`)."""
    input = kwargs.pop("input", None)  # noqa: A001  (subprocess.run's name)
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with Forked(args, **kwargs) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def child(args, **kwargs) -> Child:
    """A `Child` of `[sys.executable, "-c", CODE, *args]`: a fork (`ForkedChild`) unless
    CODE needs an interpreter of its own (`needs_own_interpreter`)."""
    own = needs_own_interpreter(os.fspath(args[2]))
    return (Child if own else ForkedChild)(args, **kwargs)
