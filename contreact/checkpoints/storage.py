"""Where one installation keeps its data: a database URL and a folder for the JSONL logs.

Every face (the CLI, Studio, the Python API, a batch's children) turns its flags, config
and environment into a `Storage` here, so all of them find the same runs. The same code
serves SQLite and PostgreSQL; only the URL differs.

A storage exists when its database holds contreact's tables: for SQLite, the file is there
and has them (a folder a `run` wrote, even with no runs left); for PostgreSQL, the database
answers and has them. Commands that start runs create a storage that does not exist; every
other command, and `contreact.load`, reports it and creates nothing (`Storage.create`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from contreact.checkpoints.locations import (
    DB_FILENAME,
    cache_home,
    default_data_dir,
    explicit_data_dir,
)


@dataclass(frozen=True)
class Storage:
    """Where one installation keeps its data: a database URL and a folder for JSONL logs."""

    url: str
    data_dir: Path
    """Local files: the SQLite database and the JSONL logs; with PostgreSQL, a cache of the
    logs of the runs this machine drove and of its batches' files (`resolve_storage`)."""
    create: bool = True
    """Whether opening it may create it (a command that starts runs), or it must exist."""

    def existing(self) -> Storage:
        """This storage, to be read: opening it creates nothing (see the module doc)."""
        return dataclasses.replace(self, create=False)

    @property
    def logs_dir(self) -> Path:
        """Folder of the per-run JSONL event logs."""
        return self.data_dir / "logs"

    @property
    def is_sqlite(self) -> bool:
        """True for the default single-file backend."""
        return self.url.startswith("sqlite")

    @property
    def sqlite_path(self) -> Path:
        """The SQLite database file (only meaningful when `is_sqlite`)."""
        database = make_url(self.url).database
        if not database:
            raise ValueError(f"SQLite URL has no file: {self.url}")
        return Path(database)

    @property
    def shown(self) -> str:
        """Where the runs are, for a person: the SQLite file, or the URL without password."""
        return str(self.sqlite_path) if self.is_sqlite else self.shown_url

    @property
    def shown_url(self) -> str:
        """The URL for people and logs: the password, if any, as `***`."""
        return make_url(self.url).render_as_string(hide_password=True)

    def redact(self, text: str) -> str:
        """`text` (an error message, say) with this URL's password, if any, as `***`."""
        password = make_url(self.url).password
        return text.replace(str(password), "***") if password else text

    @property
    def libpq_url(self) -> str:
        """The PostgreSQL URL in the form psycopg expects (no `+driver`)."""
        url = make_url(self.url)
        return url.set(drivername="postgresql").render_as_string(hide_password=False)


def resolve_storage(
    data_dir: str | Path | None = None, url: str | None = None, *, create: bool = True
) -> Storage:
    """Turn the configured data directory and/or URL into a `Storage`.

    Args:
        data_dir: Folder for the SQLite file and the logs; default `CONTREACT_HOME`, else
            `./runs`; with a PostgreSQL URL, `CONTREACT_HOME`, else the database's cache
            folder (`postgres_cache_dir`).
        url: A SQLAlchemy URL (`sqlite:///...` or `postgresql+psycopg://...`); when absent,
            `CONTREACT_DB_URL`, else the SQLite file inside `data_dir`.
        create: Whether opening it may create it (see `Storage.create`).
    """
    url = url or os.environ.get("CONTREACT_DB_URL") or None
    if url:
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        if not (url.startswith("sqlite") or url.startswith("postgresql+psycopg")):
            raise ValueError(
                f"storage.url must be sqlite:///FILE or postgresql+psycopg://..., got {url!r}"
            )
        named = Path(data_dir) if data_dir else explicit_data_dir()
        if named is None:
            named = default_data_dir() if url.startswith("sqlite") else postgres_cache_dir(url)
        return Storage(url=url, data_dir=named.expanduser().resolve(), create=create)
    folder = (Path(data_dir) if data_dir else default_data_dir()).expanduser().resolve()
    return Storage(url=f"sqlite:///{folder / DB_FILENAME}", data_dir=folder, create=create)


def postgres_cache_dir(url: str) -> Path:
    """A PostgreSQL database's cache folder: `cache_home()/HOST-PORT-DATABASE`.

    With PostgreSQL the database is the record; what a process keeps on its own disk (the
    JSONL logs of the runs it drove, a batch's per-run files) goes here, whatever folder
    it was started from. One folder per database, so two studies never mix their files.
    """
    parsed = make_url(url)
    parts = (parsed.host or "local", str(parsed.port or 5432), parsed.database or "postgres")
    name = "-".join(re.sub(r"[^A-Za-z0-9._]+", "_", part) for part in parts)
    return cache_home() / name
