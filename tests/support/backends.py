"""Storage backends for tests: SQLite in a folder, or a fresh PostgreSQL database.

The PostgreSQL fixture (tests/conftest.py) fails in CI if the server is absent and skips
elsewhere, with the reason `pg_unavailable` gives.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PG_ADMIN_URL = os.environ.get("CONTREACT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pg_unavailable() -> str | None:
    """None if PostgreSQL answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as conn:
            conn.execute("select 1")
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


@dataclass
class Backend:
    """Where a test's runs are stored, and the CLI flags that select it."""

    name: str
    data_dir: Path
    db_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def cli_args(self) -> list[str]:
        """Global flags for `contreact`."""
        args = ["--data-dir", str(self.data_dir)]
        if self.db_url:
            args += ["--db-url", self.db_url]
        return args

    def storage(self) -> Any:
        """The `Storage` the CLI will use."""
        from contreact.checkpoints.storage import resolve_storage

        return resolve_storage(self.data_dir, self.db_url)

    def make(self) -> None:
        """Make the storage with no runs in it, as a first run would (reading never creates)."""
        from contreact.checkpoints.engines import dispose_engines, engine_for

        engine_for(self.storage())
        dispose_engines()

    def storage_yaml(self) -> dict[str, Any]:
        """The `storage:` section of a config for this backend."""
        section: dict[str, Any] = {"data_dir": str(self.data_dir)}
        if self.db_url:
            section["url"] = self.db_url
        return section


@contextmanager
def postgres_database(data_dir: Path) -> Iterator[Backend]:
    """A PostgreSQL backend on a database created for it and dropped afterwards."""
    import psycopg

    name = f"contreact_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        url = f"postgresql+psycopg://{base.split('://', 1)[1]}/{name}"
        yield Backend("postgres", data_dir, url)
    finally:
        from contreact.checkpoints.engines import dispose_engines

        dispose_engines()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
