"""How a `contreact` command starts: in the resident process when one serves it, else here.

A fresh `contreact resume` spends 1.5 to 3 CPU-seconds importing LangGraph, LangChain and
SQLAlchemy before it reads a run; on a long run that is most of `resume --cycles 1` (issue
30). `contreact daemon start` leaves a process with those imported (`contreact.daemon`).
While it is up, the commands that drive or read runs (`WARM`) are forked from it: the
forked process gets this process's arguments, working directory, environment and its
three standard streams (passed over a Unix socket), so it prints to the same terminal or
pipe and reads the same input. This process stays as the command's face: it relays
Ctrl-C, SIGTERM and SIGHUP to it, the forked process dies with it (SIGKILL included), and
it exits with the command's status (or dies of the same signal).

Without a daemon, with `CONTREACT_DAEMON=off`, or when the daemon was started on other code
(an edited file, an installed package: `fingerprint` differs), the command runs here as it
always did. This module imports only the standard library: it runs before anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import site
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

WARM = frozenset({"run", "resume", "fork", "show", "report", "export", "pei"})
"""Commands a daemon starts: one-shot commands that import the engine or the analysis.
Interactive ones (`chat`) and those that manage processes of their own (`batch`, `worker`)
always run in their own process."""

VALUED = frozenset({"--data-dir", "--db-url"})
"""Options before the command that take a value (the rest are flags)."""

ENV = "CONTREACT_DAEMON"
"""`off`: never use a daemon; a path: the daemon's socket (default: `socket_path()`)."""

PACKAGE = Path(__file__).resolve().parent


def socket_path() -> Path | None:
    """Where this install's daemon listens (None when `CONTREACT_DAEMON=off`).

    One daemon per interpreter and package folder, in a folder only this user can enter.
    """
    chosen = os.environ.get(ENV, "")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    install = f"{os.path.realpath(sys.executable)}\0{PACKAGE}".encode()
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    name = f"daemon-{hashlib.sha1(install).hexdigest()[:12]}.sock"
    return Path(base) / f"contreact-{os.getuid()}" / name


def fingerprint() -> str:
    """What the daemon's imported code was read from.

    The interpreter, contreact's files (names and modification times) and the folders
    packages are installed in.

    A daemon whose fingerprint differs from its client's would run old code; the client
    then runs the command itself and the daemon stops.
    """
    digest = hashlib.sha1(sys.version.encode())
    for folder, _, files in sorted(os.walk(PACKAGE)):
        for name in sorted(files):
            if name.endswith(".py"):
                digest.update(f"{folder}/{name}:{os.stat(f'{folder}/{name}').st_mtime_ns}".encode())
    for entry in sorted(set(site.getsitepackages())):
        if os.path.isdir(entry):
            digest.update(f"{entry}:{os.stat(entry).st_mtime_ns}".encode())
    return digest.hexdigest()


def command_of(argv: list[str]) -> str | None:
    """The command `contreact ARGV` names (`resume` in `--data-dir d resume r`), if any."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg
        elif arg in ("--help", "--version"):
            return None
    return None


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """One message: a line of JSON (with file descriptors attached when given)."""
    data = json.dumps(message).encode() + b"\n"
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


class Lines:
    """The messages arriving on a socket, one JSON line each (file descriptors kept)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.fds: list[int] = []

    def next(self) -> dict[str, Any] | None:
        """The next message, or None when the other side closed the connection."""
        while b"\n" not in self.buffer:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 3)
            self.fds += fds
            if not data:
                return None
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message


def _streams() -> list[int]:
    """This process's stdin, stdout and stderr, /dev/null standing in for a closed one."""
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            fds.append(os.open(os.devnull, os.O_RDWR))
    return fds


def forward(argv: list[str]) -> int | None:
    """Have the daemon run `contreact ARGV`; its exit status, or None to run it here."""
    path = socket_path()
    if path is None or command_of(argv) not in WARM or not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None  # a socket left by a daemon that is gone
    request = {
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": _umask(),
        "fingerprint": fingerprint(),
    }
    command: list[int] = []
    held: list[int] = []

    def relay(signum: int, frame: object) -> None:
        # Before the command's pid is known, a signal waits for it (or, if the daemon
        # declines, is acted on here); then it goes to the command, which acts on it.
        if not command:
            held.append(signum)
            return
        try:
            os.kill(command[0], signum)
        except ProcessLookupError:
            pass

    relayed = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {signum: signal.signal(signum, relay) for signum in relayed}
    with sock:
        send(sock, {"run": request}, _streams())
        lines = Lines(sock)
        answer = lines.next()
        if answer is None or "pid" not in answer:
            for signum, handler in before.items():
                signal.signal(signum, handler)
            if answer and answer.get("stale"):
                print(
                    "contreact: the daemon was started on other code (files changed or "
                    "packages installed since); it stops, and this command runs here. "
                    "`contreact daemon start` starts a fresh one.",
                    file=sys.stderr,
                )
            for waiting in held:
                signal.raise_signal(waiting)
            return None
        command.append(int(answer["pid"]))
        for waiting in held:
            relay(waiting, None)
        end = lines.next()
    if end is None:
        print("contreact: the daemon ended before the command did", file=sys.stderr)
        return 1
    if "signal" in end:
        # Die of the same signal, so whoever started this process sees what killed it.
        died = signal.Signals(int(end["signal"]))
        if died not in (signal.SIGKILL, signal.SIGSTOP):  # whose action cannot be set
            signal.signal(died, signal.SIG_DFL)
        os.kill(os.getpid(), died)
    return int(end["exit"])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main() -> None:
    """Console-script entry point: the daemon's answer when it serves, else the command line."""
    code = forward(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from contreact.cli import main as command_line

    command_line()
