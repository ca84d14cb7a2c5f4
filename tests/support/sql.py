"""Watch the SQL statements an engine runs (round-trip and query-count tests)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine, event


def trace_sql(engine: Engine, seen: Callable[[str], None]) -> None:
    """Call `seen` with every statement SQLite runs on the engine's connections.

    SQLite's own trace, not SQLAlchemy's events: the journal runs its statements on the
    raw DBAPI cursor, which SQLAlchemy never sees.
    """
    event.listen(engine, "checkout", lambda dbapi, *_: dbapi.set_trace_callback(seen))
    event.listen(engine, "checkin", lambda dbapi, *_: dbapi and dbapi.set_trace_callback(None))


class Statements:
    """Counts the SQL statements an engine runs."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        trace_sql(engine, self._seen)

    def _seen(self, statement: str) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE")):
            self.count += 1
