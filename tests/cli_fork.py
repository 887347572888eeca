"""`python -m robosafe ARGS` for the tests, forked from a parent process that has already
imported the third-party libraries most commands import (typer, rich, numpy, scipy, numba,
pandas, pyarrow, ...), so that a test's command pays for its own work and robosafe's imports,
not for those libraries' every time (the main suite starts a few hundred commands).

Each command is still a process of its own that starts as `python -m robosafe` does: its own
`__main__`, `sys.argv`, `sys.path[0]` (the working directory), environment, working directory,
standard streams (stdin is the test process' own, as `subprocess.run` gives it), exit status
(SystemExit, an uncaught exception's traceback and status 1, Ctrl-C's SIGINT), atexit handlers
and the wait for its threads. It shares with the parent only what the parent imported before
forking; robosafe itself, MuJoCo (it picks its GL backend when imported) and everything else is
imported by the command. A command whose environment differs from the parent's in a variable
read at interpreter start-up or by a preloaded library (`PYTHON*`, locale, thread counts,
`NUMBA_*`) runs as a plain subprocess instead, as does every command when
`ROBOSAFE_TEST_NO_FORK` is set.

One parent per test process (each pytest-xdist worker), started on first use and killed at its
exit; `run_robosafe` in tests/conftest.py is the caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# Imported before the fork: each is imported by most commands, none reads a variable the tests
# vary when imported. A library's native thread pool (OpenBLAS, Arrow) is fork-aware, as
# multiprocessing's fork start method needs; a Python thread would not survive a fork.
PRELOAD = ("typer", "click", "rich.console", "rich.table", "numpy", "scipy.stats", "numba",
           "pandas", "pyarrow", "pyarrow.parquet", "yaml", "duckdb")
# read at interpreter start-up or when one of PRELOAD is imported
STARTUP_VARS = ("PYTHON", "NUMBA_", "OMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "ARROW_", "LC_",
                "LANG")
# the environment the parent starts with: this test process' before any test changed it
START_ENV = dict(os.environ)


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARS)}


def _recv_json(conn: socket.socket, buf: bytearray) -> dict | None:
    while b"\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


def _send_json(conn: socket.socket, payload: dict) -> None:
    conn.sendall(json.dumps(payload).encode() + b"\n")


def _preload() -> None:
    import gc
    import importlib

    # anything a library prints while imported would be missing from every command's stderr
    saved = os.dup(2)
    with tempfile.TemporaryFile() as said:
        os.dup2(said.fileno(), 2)
        try:
            for name in PRELOAD:
                try:
                    importlib.import_module(name)
                except ImportError:  # an install without it: the commands do without it too
                    pass
            sys.stderr.flush()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        said.seek(0)
        printed = said.read().decode(errors="replace").strip()
    if printed:
        raise SystemExit(f"cli_fork: importing {PRELOAD} printed: {printed}")
    # numba's CPU target loads its implementation registries at a process's first compiled
    # call (~0.25 s of CPU; every command that scores, steps a world or tabulates cutoffs makes
    # one): once here, as for an import. The kernels themselves are the command's to load.
    with contextlib.suppress(ImportError):
        from numba.core.registry import cpu_target

        cpu_target.target_context.refresh()
    if threading.active_count() != 1:
        raise SystemExit("cli_fork: a preloaded library started a Python thread")
    # The preloaded objects outlive every command: frozen, a command's garbage collections never
    # scan them (unfrozen, they made a short command's collections cost more than its imports).
    gc.freeze()


def _serve(path: str) -> tuple[dict, list[int]]:
    """The parent: preload, then fork one handler per request, which forks the command, reports
    its pid and then its exit status. Returns only in a command, with its request and the
    descriptors of its standard streams."""
    import signal

    _preload()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the handlers
    # a test process that dies without its exit handlers (killed) leaves this parent orphaned:
    # it looks for that between requests and ends itself
    test_process = os.getppid()
    server.settimeout(1.0)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if os.getppid() != test_process:
                import shutil

                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                os._exit(0)
            continue
        conn.settimeout(None)
        if os.fork():
            conn.close()
            continue
        server.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the handler waits for its command
        data, fds, _, _ = socket.recv_fds(conn, 1 << 22, 3)
        pid = os.fork()
        if pid == 0:
            conn.close()
            return json.loads(data), fds
        for fd in fds:
            os.close(fd)
        _send_json(conn, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send_json(conn, {"returncode": os.waitstatus_to_exitcode(status)})
        os._exit(0)


def _become_command(request: dict, fds: list[int]) -> None:
    """Run `python -m robosafe ARGS` in this forked process and exit as the interpreter would."""
    import atexit
    import runpy
    import signal

    import numpy as np

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # the parent's (from its TMPDIR) is cached; the command reads its own
    np.random.seed()  # a fresh interpreter seeds numpy's legacy global state from the OS
    script = request.get("script")
    code = 0
    try:
        if script:  # the `robosafe` console script: its directory first, `robosafe.cli:main`
            sys.path[0] = os.path.dirname(script)
            sys.argv = [script, *request["args"]]
            from robosafe.cli import main

            sys.exit(main())
        sys.path[0] = os.getcwd()  # as `python -m` puts the working directory first
        sys.argv = ["-m", *request["args"]]  # runpy sets argv[0] to the module's file
        runpy.run_module(request.get("module", "robosafe"), run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT  # an uncaught Ctrl-C ends the interpreter by SIGINT
    except BaseException:  # noqa: BLE001 - the interpreter prints it and exits 1
        sys.excepthook(*sys.exc_info())
        code = 1
    # The interpreter's exit but for tearing down every module the parent imported (longer
    # than a short command's imports): wait for threads, run atexit handlers, flush.
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    _end(code)


def _end(code: int) -> None:
    """Exit with `code` as the command did: a negative one is the signal that ended it."""
    import signal

    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _exit_status(value: object) -> int:
    """The status the interpreter exits with for `SystemExit(value)`."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


class _Parent:
    """This test process' forking parent."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="robosafe-cli-fork-")
        self.path = os.path.join(self.dir, "sock")
        self.proc = subprocess.Popen([sys.executable, __file__, self.path],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     env=START_ENV)
        if self.proc.stdout.readline() != b"ready\n":
            self.proc.wait()
            raise RuntimeError("cli_fork: the forking parent did not start (its error is above; "
                               "ROBOSAFE_TEST_NO_FORK=1 runs every command as a subprocess)")

    def usable(self, env: dict[str, str]) -> bool:
        return self.proc.poll() is None and _startup_env(env) == _startup_env(START_ENV)

    def run(self, args: list[str], cwd: str, env: dict[str, str], timeout: float,
            module: str = "robosafe") -> tuple[int, bytes, bytes]:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                open(os.devnull, "rb") as null:
            stdin = 0 if _usable_fd(0) else null.fileno()
            code = _request(self.path, {"args": args, "cwd": cwd, "env": env, "module": module},
                            [stdin, out.fileno(), err.fileno()], timeout)
            out.seek(0)
            err.seek(0)
            return code, out.read(), err.read()

    def close(self) -> None:
        import shutil

        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _request(path: str, request: dict, fds: list[int], timeout: float | None) -> int:
    """Have the parent at `path` run `request` on these standard streams; its exit status."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
        buf = bytearray()
        pid = _recv_json(conn, buf)["pid"]
        conn.settimeout(timeout)
        try:
            done = _recv_json(conn, buf)
        except TimeoutError:
            os.kill(pid, 9)
            raise subprocess.TimeoutExpired(request["args"], timeout) from None
        if done is None:
            raise RuntimeError("cli_fork: the parent's handler ended without a status")
        return done["returncode"]


def _usable_fd(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _text(data: bytes) -> str:
    """As `subprocess.run(text=True)` decodes: the locale's encoding, universal newlines."""
    import locale

    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


_parent: _Parent | None = None


def forked(env: dict[str, str]) -> bool:
    """Whether a command with this environment runs forked (else as a plain subprocess)."""
    global _parent
    if os.environ.get("ROBOSAFE_TEST_NO_FORK") or not hasattr(os, "fork"):
        return False
    if _parent is None:
        import atexit

        _parent = _Parent()
        atexit.register(_parent.close)
    return _parent.usable(env)


def run(args: list[str], cwd: str | Path | None, env: dict[str, str], timeout: float,
        module: str = "robosafe") -> subprocess.CompletedProcess:
    """`python -m robosafe ARGS` with text output captured, as `subprocess.run` returns it
    (another `module` only in tests/test_cli_fork.py, to look inside a forked command)."""
    argv = [sys.executable, "-m", module, *args]
    if not forked(env):
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                              env=env, check=False)
    code, out, err = _parent.run(args, os.path.abspath(cwd or os.getcwd()), env, timeout,
                                 module)
    return subprocess.CompletedProcess(argv, code, _text(out), _text(err))


SOCKET_VAR = "ROBOSAFE_TEST_FORK_SOCKET"
STARTUP_VAR = "ROBOSAFE_TEST_FORK_STARTUP"  # the parent's start-up variables, as JSON


def shell_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a shell command whose `robosafe` this test process' parent forks as the console
    script would run (on the shell's own streams): a `robosafe` in the parent's own temporary
    folder goes first on PATH. `env` itself when commands with it are not forked."""
    if not forked(env):
        return env
    shim = Path(_parent.dir) / "bin" / "robosafe"
    if not shim.exists():
        shim.parent.mkdir()
        real = Path(sys.executable).parent / "robosafe"
        # -S: no site-packages to scan; this file needs only the standard library
        shim.write_text(f"#!{sys.executable} -S\n"
                        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                        f"import cli_fork\ncli_fork.script({str(real)!r})\n")
        shim.chmod(0o755)
    return {**env, "PATH": f"{shim.parent}{os.pathsep}{env.get('PATH', '')}",
            SOCKET_VAR: _parent.path, STARTUP_VAR: json.dumps(_startup_env(START_ENV))}


def script(real: str) -> None:
    """The `robosafe` a shell command runs: forked by the test process' parent."""
    env = dict(os.environ)
    path = env.pop(SOCKET_VAR)
    parents = json.loads(env.pop(STARTUP_VAR))
    # the command's PATH is the user's: without this folder
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p != os.path.dirname(sys.argv[0]))
    if _startup_env(env) != parents:  # the shell changed one: the real console script, as run()
        os.execve(real, [real, *sys.argv[1:]], env)
    _end(_request(path, {"args": sys.argv[1:], "cwd": os.getcwd(), "env": env,
                         "script": real}, [0, 1, 2], None))


if __name__ == "__main__":
    _become_command(*_serve(sys.argv[1]))
