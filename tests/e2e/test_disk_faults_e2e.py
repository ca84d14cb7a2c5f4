"""Database and disk faults: one clear line naming the file and the cause (docs/faults.md).

Each fault also loses nothing committed, and `resume` recovers once the fault is gone.
Faults are made for real: a second connection holding the SQLite write lock; a tiny tmpfs
filled to the last byte under a running run (needs `mount`, i.e. root; without it a file
size limit on the process, RLIMIT_FSIZE, stands in for the full disk, and is tested
too); the data directory made read-only under a stopped run (a read-only bind mount as
root, who ignores file modes, else chmod); a truncated, overwritten or scribbled database
file; the JSONL log deleted mid-run.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contreact.stub import StubServer
from support.backends import Backend
from support.cli import cli, cli_env, cli_in_process, cli_start, kill_when
from support.paths import ROOT
from support.runs import outcome, read_log, write_config

LATENCY_MS = 150


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What an uninterrupted 2-cycle run leaves behind, made once.

    The stub's answers do not depend on its latency, so it is made at full speed.
    """
    folder = tmp_path_factory.mktemp("reference")
    backend = Backend("sqlite", folder / "runs")
    with StubServer().start() as server:
        config = write_config(folder / "ref.yaml", backend, cycles=2)
        assert cli_in_process(backend, "run", str(config), "--host", server.url).returncode == 0
    return outcome(backend, "run-1")


def _stop_midrun(
    backend: Backend,
    server: StubServer,
    config: Path,
    fault: Callable[[], None],
    env: dict[str, str] | None = None,
    after: int = 4,
) -> tuple[int, str]:
    """Start a run, let `after` model calls happen, cause `fault`; the run's exit and stderr."""
    proc = cli_start(backend, "run", str(config), "--host", server.url, env=env)
    before = len(server.requests())
    deadline = time.monotonic() + 60
    while len(server.requests()) < before + after:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.02)
    fault()
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_locked_database_is_waited_for_then_named_and_resume_recovers(
    tmp_path: Path, sqlite_backend: Backend, reference: Any
) -> None:
    with StubServer(latency_ms=LATENCY_MS).start() as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=2)
        db = sqlite_backend.data_dir / "contreact.db"
        lockers: list[sqlite3.Connection] = []

        def lock() -> None:
            locker = sqlite3.connect(db, timeout=30, isolation_level=None)
            lockers.append(locker)
            # A lock shorter than the busy timeout is waited through ...
            locker.execute("BEGIN IMMEDIATE")
            time.sleep(0.3)
            locker.execute("COMMIT")
            time.sleep(0.5)
            # ... one held longer ends the run with one line once the timeout is spent.
            locker.execute("BEGIN IMMEDIATE")

        env = {"CONTREACT_SQLITE_BUSY_TIMEOUT_MS": "1500"}
        code, err = _stop_midrun(sqlite_backend, server, config, lock, env=env, after=3)
        lockers[0].execute("COMMIT")
        lockers[0].close()
        line = _one_line(err)
        print(f"FAULT LINE: {line}")
        assert code == 1
        assert f"database {db} is locked by another process (waited 1.5 s)" in line
        assert "nothing committed is lost" in line and "contreact resume run-1" in line
        assert cli_in_process(sqlite_backend, "status", "run-1", "--json").returncode == 0

        resumed = cli(sqlite_backend, "resume", "run-1", "--host", server.url)
        assert resumed.returncode == 0, resumed.stderr
    assert outcome(sqlite_backend, "run-1") == reference


def _can_mount() -> bool:
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return False
    probe = Path(f"/tmp/contreact-mount-probe-{uuid.uuid4().hex[:8]}")
    probe.mkdir()
    try:
        ok = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True
            ).returncode
            == 0
        )
        if ok:
            subprocess.run(["umount", str(probe)], check=True)
        return ok
    finally:
        probe.rmdir()


CAN_MOUNT = _can_mount()


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(folder: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for block in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * block):
                    pass
    finally:
        os.close(fd)
    return filler


@pytest.mark.skipif(not CAN_MOUNT, reason="needs mount (root) for a tmpfs; see the RLIMIT test")
def test_a_full_disk_stops_the_run_with_one_line_and_resume_recovers(
    tmp_path: Path, reference: Any
) -> None:
    with (
        _tmpfs(tmp_path / "disk", "16m") as disk,
        StubServer(latency_ms=LATENCY_MS).start() as server,
    ):
        backend = Backend("sqlite", disk / "runs")
        config = write_config(tmp_path / "c.yaml", backend, cycles=2)
        filler: list[Path] = []
        code, err = _stop_midrun(backend, server, config, lambda: filler.append(_fill(disk)))
        line = _one_line(err)
        print(f"FAULT LINE: {line}")
        assert code == 1
        assert "disk full writing" in line and str(backend.data_dir) in line, line
        assert "nothing committed is lost" in line
        filler[0].unlink()
        resumed = cli(backend, "resume", "run-1", "--host", server.url)
        assert resumed.returncode == 0, resumed.stderr
        assert outcome(backend, "run-1") == reference


def test_a_file_size_limit_stops_the_run_with_one_line_and_resume_recovers(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    """The full disk without root: the process may not grow any file past a limit."""
    with StubServer(latency_ms=LATENCY_MS).start() as server:
        # The reference is made the same way: one cycle, then extended by one.
        made = Backend("sqlite", tmp_path / "reference")
        ref_config = write_config(tmp_path / "ref.yaml", made, cycles=1)
        assert cli_in_process(made, "run", str(ref_config), "--host", server.url).returncode == 0
        assert cli_in_process(made, "resume", "run-1", "--cycles", "1").returncode == 0
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1)
        first = cli(sqlite_backend, "run", str(config), "--host", server.url)
        assert first.returncode == 0, first.stderr
        biggest = max(p.stat().st_size for p in sqlite_backend.data_dir.rglob("*") if p.is_file())

        def limited() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (biggest + 4096, biggest + 4096))

        # The run was made for 1 cycle; extending it needs writes the limit refuses.
        stopped = subprocess.run(
            [
                sys.executable,
                "-m",
                "contreact",
                *sqlite_backend.cli_args,
                "resume",
                "run-1",
                "--cycles",
                "1",
            ],
            cwd=ROOT,
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limited,
            stdin=subprocess.DEVNULL,
        )
        line = _one_line(stopped.stderr)
        print(f"FAULT LINE: {line}")
        assert stopped.returncode == 1
        # SQLite reports EFBIG as a plain I/O error; the line still names the file.
        assert "disk I/O error on database" in line or "file size limit" in line, line
        assert str(sqlite_backend.data_dir) in line
        resumed = cli(sqlite_backend, "resume", "run-1", "--host", server.url)
        if resumed.returncode != 0 and "already completed" in resumed.stderr:
            resumed = cli(sqlite_backend, "resume", "run-1", "--cycles", "1")
        assert resumed.returncode == 0, resumed.stderr
    assert outcome(sqlite_backend, "run-1") == outcome(made, "run-1")


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """`folder` read-only: a read-only bind mount as root (root ignores file modes)."""
    if CAN_MOUNT:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", str(folder)], check=True)
        return
    files = [folder, *folder.rglob("*")]
    for path in files:
        path.chmod(0o500 if path.is_dir() else 0o400)
    try:
        yield
    finally:
        for path in files:
            path.chmod(0o700 if path.is_dir() else 0o600)


def test_a_read_only_data_directory_is_named_and_resume_recovers(
    tmp_path: Path, sqlite_backend: Backend, reference: Any
) -> None:
    with StubServer(latency_ms=LATENCY_MS).start() as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=2)
        # Killed mid-cycle first: a file system cannot turn read-only under open files.
        proc = cli_start(sqlite_backend, "run", str(config), "--host", server.url)
        before = len(server.requests())
        kill_when(proc, lambda: len(server.requests()) >= before + 4)
        with _read_only(sqlite_backend.data_dir):
            done = cli(sqlite_backend, "resume", "run-1")
            line = _one_line(done.stderr)
            print(f"FAULT LINE: {line}")
            assert done.returncode == 1
            assert str(sqlite_backend.data_dir) in line and (
                "read-only" in line or "cannot open" in line
            ), line
        resumed = cli(sqlite_backend, "resume", "run-1")
        assert resumed.returncode == 0, resumed.stderr
    assert outcome(sqlite_backend, "run-1") == reference


def _damage_cases() -> dict[str, Callable[[Path], None]]:
    def empty(db: Path) -> None:
        db.write_bytes(b"")

    def halved(db: Path) -> None:
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 2])

    def overwritten(db: Path) -> None:
        db.write_bytes(b"<html>not a database</html>" * 200)

    def scribbled(db: Path) -> None:
        data = bytearray(db.read_bytes())
        page = int.from_bytes(data[16:18], "big")
        data[page : len(data)] = b"\xa5" * (len(data) - page)  # every page but the first
        db.write_bytes(bytes(data))

    return {"empty": empty, "halved": halved, "overwritten": overwritten, "scribbled": scribbled}


def _checkpoint(db: Path) -> None:
    """Fold the write-ahead log into the file, as a clean shutdown does."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not db.with_name(db.name + "-wal").exists()


@pytest.mark.parametrize("damage", list(_damage_cases()))
def test_a_damaged_database_is_reported_not_recreated(
    tmp_path: Path, sqlite_backend: Backend, damage: str
) -> None:
    with StubServer().start() as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1)
        assert (
            cli_in_process(sqlite_backend, "run", str(config), "--host", server.url).returncode == 0
        )
        db = sqlite_backend.data_dir / "contreact.db"
        _checkpoint(db)
        backup = tmp_path / "backup.db"
        shutil.copy(db, backup)
        _damage_cases()[damage](db)
        damaged = db.read_bytes()
        for command in (["status", "run-1"], ["resume", "run-1", "--cycles", "1"]):
            done = cli(sqlite_backend, *command)
            line = _one_line(done.stderr)
            print(f"FAULT LINE: {line}")
            assert done.returncode == 1, (command, done.stdout)
            assert f"database {db} is" in line, line
            assert db.read_bytes() == damaged, "the damaged file was changed"
        shutil.copy(backup, db)  # restored: everything committed is there
        status = cli(sqlite_backend, "status", "run-1")
        assert status.returncode == 0 and "completed" in status.stdout


def test_a_jsonl_log_deleted_mid_run_is_rebuilt_from_the_database(
    tmp_path: Path, sqlite_backend: Backend, reference: Any
) -> None:
    with StubServer(latency_ms=LATENCY_MS).start() as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=2)
        log = sqlite_backend.data_dir / "logs" / "run-1.jsonl"
        code, err = _stop_midrun(sqlite_backend, server, config, log.unlink)
        assert code == 0, err
        exported = cli_in_process(sqlite_backend, "export", "run-1").stdout.splitlines()
        assert len(read_log(sqlite_backend, "run-1")) == len(exported)
        assert outcome(sqlite_backend, "run-1") == reference
        # Deleted while the run is stopped: the next command that drives it rebuilds it.
        log.unlink()
        extended = cli(sqlite_backend, "resume", "run-1", "--cycles", "1")
        assert extended.returncode == 0, extended.stderr
        events = read_log(sqlite_backend, "run-1")
        assert events[: len(exported)] == [__import__("json").loads(x) for x in exported]
