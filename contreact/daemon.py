"""The resident process that starts `contreact` commands with the engine already imported.

`contreact daemon start` runs `serve` in a process of its own: it imports the command line
and the engine once (what a fresh process spends 1.5 to 3 CPU-seconds on), then waits on a
Unix socket (`launch.socket_path`, a folder only this user can enter). For each command a
client (`launch.forward`) hands over, it forks a handler, and the handler forks the
command's process, which takes the client's standard streams, working directory, umask and
environment and runs the command line as a fresh process would; the handler reports its
pid, waits for it, and sends back its exit status. The server itself stays single-threaded
and holds nothing but imported modules (no connection, no file of a run), so every fork
starts clean.

It stops on `contreact daemon stop`, SIGTERM or SIGINT, after `idle` seconds without a
command (when given), and when a client shows it other code (`launch.fingerprint`): an
edited checkout or an upgraded package must not be served by modules imported before.
"""

from __future__ import annotations

import io
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from contreact.launch import Lines, fingerprint, send
from contreact.run_process import PRELOAD, become

_STOP = False


def _stop(signum: int, frame: object) -> None:
    global _STOP
    _STOP = True


def serve(path: Path, idle: float | None = None) -> None:
    """Serve commands on the socket at `path` until stopped (see the module doc)."""
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)
    from contreact.checkpoints.statements import compile_all

    compiled = compile_all()
    started, served = time.time(), 0
    mine = fingerprint()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(64)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    handlers: set[int] = set()
    last = time.monotonic()
    print(f"contreact daemon {os.getpid()}: serving at {path}", flush=True)
    try:
        while not _STOP:
            ready, _, _ = select.select([listener], [], [], 1.0)
            handlers -= _reaped(handlers)
            if not ready:
                if idle and not handlers and time.monotonic() - last > idle:
                    print(f"contreact daemon {os.getpid()}: idle for {idle:.0f} s, stopping")
                    break
                continue
            conn, _ = listener.accept()
            last = time.monotonic()
            if _peer(conn)[1] != os.getuid():
                conn.close()
                continue
            lines = Lines(conn)
            message = lines.next()
            if message is None:
                conn.close()
            elif "status" in message:
                info = {
                    "pid": os.getpid(),
                    "since": started,
                    "served": served,
                    "idle": idle,
                    "compiled": compiled,
                }
                send(conn, {"status": info})
                conn.close()
            elif "stop" in message:
                send(conn, {"stopping": os.getpid()})
                conn.close()
                break
            elif message["run"].get("fingerprint") != mine:
                send(conn, {"stale": True})
                conn.close()
                _close(lines.fds)
                print(f"contreact daemon {os.getpid()}: a client runs other code, stopping")
                break
            else:
                served += 1
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    _handle(conn, lines.fds, message["run"])
                conn.close()
                _close(lines.fds)
                handlers.add(pid)
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        print(f"contreact daemon {os.getpid()}: stopped after {served} commands", flush=True)


def _reaped(pids: set[int]) -> set[int]:
    done = set()
    for pid in pids:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            finished = pid
        if finished:
            done.add(pid)
    return done


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return pid, uid, gid


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _handle(conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
    """The handler (a fork of the server): start the command, report its pid and its end."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)  # the client stops the command, not us
    client = _peer(conn)[0]
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(fds, request, client)
    _close(fds)
    try:
        send(conn, {"pid": pid})
    except OSError:
        pass  # the client is gone; the command, which watches it, goes too
    _, status = os.waitpid(pid, 0)
    end = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {}
    end.setdefault("exit", os.waitstatus_to_exitcode(status) if not end else 1)
    try:
        send(conn, end)
    except OSError:
        pass
    os._exit(0)


def _command(fds: list[int], request: dict[str, Any], client: int) -> None:
    """The command's process: the client's streams, folder and environment, then the CLI."""
    for fd, target in zip(fds, (0, 1, 2), strict=True):
        os.dup2(fd, target)
    _close(fds)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    env: dict[str, str] = dict(request["env"])
    env["CONTREACT_PARENT_PID"] = str(client)  # die with the client (cli.app.die_with_parent)
    os.chdir(request["cwd"])
    os.umask(int(request["umask"]))
    become([str(a) for a in request["argv"]], env)
    _reopen_streams(env)
    from contreact.cli import main
    from contreact.cli.app import reopen_consoles

    reopen_consoles()
    code = 1
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    os._exit(code)


def _reopen_streams(env: dict[str, str]) -> None:
    """sys.stdin/stdout/stderr over the client's descriptors, buffered as its Python would.

    The server's streams were made for its own log file; these follow the client's
    terminal or pipe (line-buffered on a terminal, unbuffered with PYTHONUNBUFFERED).
    """
    encoding = (env.get("PYTHONIOENCODING") or "utf-8").split(":")[0] or "utf-8"
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))

    def writer(fd: int, errors: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "wb", closefd=False)
        tty = raw.isatty()
        buffer: io.RawIOBase | io.BufferedWriter = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffer,  # type: ignore[arg-type]
            encoding=encoding,
            errors=errors,
            line_buffering=tty or fd == 2,
            write_through=unbuffered,
        )

    sys.stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding=encoding
    )
    sys.stdout = writer(1, "strict")
    sys.stderr = writer(2, "backslashreplace")


def ask(path: Path, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    """Send the daemon at `path` one message; its answer, or None when none is serving."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        send(sock, message)
        return Lines(sock).next()
    except OSError:
        return None
    finally:
        sock.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None)
