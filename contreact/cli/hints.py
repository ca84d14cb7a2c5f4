"""Hints run as printed: a `contreact ...` a line suggests names the storage it needs.

Lines suggest the next command: ``run X failed: ...; `contreact resume X` continues it``.
Typed as shown, such a command looks for runs where a bare command looks (`$CONTREACT_DB_URL`,
else `$CONTREACT_HOME` or `./runs`), which is not where this command's runs are when they came
from `--storage`, a global flag or a config's `storage`: the suggestion would answer "no run
named X". So every backticked `contreact COMMAND ...` in a line the CLI prints gets
`--storage WHERE` when its command takes that option and the storage differs.

A database URL is written without its password (a hint is printed, logged, pasted):
PostgreSQL's client reads the password from `PGPASSWORD` or `~/.pgpass` instead.

The program is named as it was typed when a bare `contreact` would not run it: the README
runs `.venv/bin/contreact demo` with no `.venv/bin` on `PATH`, where `contreact show RUN`
answers "command not found".
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contreact.checkpoints.storage import Storage

SUGGESTED = re.compile(r"`(contreact [^`]+)`")

TAKING_STORAGE: set[str] = set()
"""The commands that take `--storage` (those that touch runs): `cli.app.command` adds each."""


def storage_flag(where: Storage) -> str | None:
    """`--storage` and its value for `where`, or None when a bare command finds it anyway."""
    from sqlalchemy.engine import make_url

    from contreact.checkpoints.locations import DB_FILENAME
    from contreact.checkpoints.storage import resolve_storage

    try:
        bare = resolve_storage(None, None)
    except ValueError:
        bare = None
    if bare is not None and bare.url == where.url and bare.data_dir == where.data_dir:
        return None
    if where.is_sqlite:
        folder_file = where.sqlite_path == where.data_dir / DB_FILENAME
        value = str(where.data_dir) if folder_file else f"sqlite:///{where.sqlite_path}"
    else:
        value = make_url(where.url).set(password=None).render_as_string(hide_password=False)
    return f"--storage {shlex.quote(value)}"


def typed_program() -> str | None:
    """This program as it was typed, when a bare `contreact` would not run it (else None).

    Only a `contreact` console script started by its path counts: under `python -m` or a
    test runner the typed program is not one a hint can name.
    """
    typed = sys.argv[0] if sys.argv else ""
    if Path(typed).name != "contreact" or os.sep not in typed:
        return None
    found = shutil.which("contreact")
    if found is not None and Path(found).resolve() == Path(typed).resolve():
        return None
    return shlex.quote(typed)


def runnable(line: str, where: Storage | None) -> str:
    """`line` with each suggested command made to run as printed.

    It gets `--storage` when it needs that to find `where`, and the program as it was typed
    when a bare `contreact` would not run it (`typed_program`).
    """
    if "`contreact " not in line:
        return line
    try:
        flag = None if where is None else storage_flag(where)
        program = typed_program()
    except Exception:  # noqa: BLE001 - a hint left as it was beats a line not printed
        return line
    if flag is None and program is None:
        return line

    def completed(match: re.Match[str]) -> str:
        command = match.group(1)
        words = command.split()
        if flag is not None and words[1] in TAKING_STORAGE and "--storage" not in words:
            command = f"{command} {flag}"
        if program is not None:
            command = program + command.removeprefix("contreact")
        return f"`{command}`"

    return SUGGESTED.sub(completed, line)
