"""Fixtures shared by every tier: storage backends and the stub server.

The helpers behind them, and the ones tests call directly, live in `tests/support/`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contreact.stub import StubServer
from support.backends import PG_ADMIN_URL, Backend, pg_unavailable, postgres_database
from support.ci import IN_CI


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """A fresh SQLite data directory."""
    return Backend("sqlite", tmp_path / "runs")


@pytest.fixture
def postgres_backend(tmp_path: Path) -> Iterator[Backend]:
    """A fresh PostgreSQL database (created and dropped around the test)."""
    reason = pg_unavailable()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"PostgreSQL must be available in CI at {PG_ADMIN_URL}: {reason}")
        pytest.skip(f"PostgreSQL not available at {PG_ADMIN_URL}: {reason}")
    with postgres_database(tmp_path / "runs") as backend:
        yield backend


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each storage backend in turn (the PostgreSQL one marked `postgres`)."""
    fixture = "postgres_backend" if request.param == "postgres" else "sqlite_backend"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """The stub server with the deterministic simulated explorer."""
    with StubServer().start() as server:
        yield server
