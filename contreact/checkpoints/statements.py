"""Statements compiled once per dialect and run on the raw DBAPI cursor.

The journal, the event log, memory and the registry each read or write a few rows per
step; SQLAlchemy's execution path cost several times the query itself. `Prepared` keeps
the SQL SQLAlchemy compiles from the table definitions and runs it directly;
`insert_ignore` (the idempotency primitive) and `upsert` are built on it.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Engine, Table, bindparam

from contreact.checkpoints.stored_text import EscapedText
from contreact.checkpoints.transactions import Tx, reading


def _dialect(name: str) -> Any:
    """SQLAlchemy's module for one backend, imported when a statement first needs it.

    A run on SQLite never loads the PostgreSQL dialect (and the reverse): `resume` pays
    for the backend it uses only (start-up time, `benchmarks/cost/startup.py`).
    """
    return importlib.import_module(f"sqlalchemy.dialects.{name}")


class Prepared:
    """A statement compiled once per dialect to DBAPI SQL, run on the raw connection.

    Every step of a run reads or writes a few rows (its journal record, its events, a
    memory); SQLAlchemy's execution path (cache key, compiled-cache look-up, result
    wrappers) cost several times the query itself. A `Prepared` statement is the same
    SQL, compiled by SQLAlchemy from the same table definitions, with its parameters
    bound by name in the order the compiled text wants them. Only text and number
    columns pass through here; the one processing their types ask for (text escaped
    where the backend cannot store it, `checkpoints.stored_text`) is applied here too.
    """

    def __init__(self, build: Callable[[str], Any]) -> None:
        """`build(dialect_name)`: the statement (bound parameters named, values left out)."""
        self._build = build
        self._compiled: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._processing: dict[str, _Processing] = {}
        _MADE.add(self)

    def sql(self, dialect: str) -> tuple[str, tuple[str, ...]]:
        """The DBAPI SQL for `dialect` and the parameter names in binding order."""
        found = self._compiled.get(dialect)
        if found is None:
            if dialect == "sqlite":
                compiled_with: Any = _dialect("sqlite").dialect(paramstyle="qmark")
            elif dialect == "postgresql":
                compiled_with = _dialect("postgresql").psycopg.dialect(paramstyle="format")
            else:  # pragma: no cover - only the two supported backends reach here
                raise RuntimeError(f"unsupported database dialect {dialect}")
            statement = self._build(dialect)
            compiled = statement.compile(dialect=compiled_with)
            found = (str(compiled), tuple(compiled.positiontup or ()))
            self._compiled[dialect] = found
            self._processing[dialect] = _processing(statement, compiled, found[1])
        return found

    def _params(self, dialect: str, params: dict[str, Any]) -> tuple[Any, ...]:
        """The parameters in binding order, each as its column's type stores it."""
        names = self.sql(dialect)[1]
        binds = self._processing[dialect].binds
        if binds is None:
            return tuple(params[n] for n in names)
        pairs = zip(names, binds, strict=True)
        return tuple(params[n] if f is None else f(params[n]) for n, f in pairs)

    def _row(self, dialect: str, row: Sequence[Any]) -> tuple[Any, ...]:
        """A result row, each value as its column's type reads it back."""
        results = self._processing[dialect].results
        if results is None:
            return tuple(row)
        return tuple(v if f is None else f(v) for v, f in zip(row, results, strict=True))

    @contextmanager
    def _cursor(self, conn: Tx, params: dict[str, Any]) -> Iterator[Any]:
        """The DBAPI cursor the statement ran on, in `conn`'s transaction; closed after."""
        dialect = conn.dialect.name
        sql, _ = self.sql(dialect)
        cursor = conn.connection.cursor()
        try:
            cursor.execute(sql, self._params(dialect, params))
            yield cursor
        finally:
            cursor.close()

    def execute(self, conn: Tx, params: dict[str, Any]) -> None:
        """Run it for its effect."""
        with self._cursor(conn, params):
            pass

    def execute_many(self, conn: Tx, rows: Sequence[dict[str, Any]]) -> None:
        """Run it once per row of parameters, in one call to the driver.

        On PostgreSQL the driver pipelines them: one round trip for all.
        """
        dialect = conn.dialect.name
        sql, _ = self.sql(dialect)
        cursor = conn.connection.cursor()
        try:
            cursor.executemany(sql, [self._params(dialect, row) for row in rows])
        finally:
            cursor.close()

    def rows(self, conn: Tx, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Every row of the result."""
        dialect = conn.dialect.name
        with self._cursor(conn, params) as cursor:
            return [self._row(dialect, row) for row in cursor.fetchall()]

    def first(self, conn: Tx, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row, or None."""
        with self._cursor(conn, params) as cursor:
            row = cursor.fetchone()
            return None if row is None else self._row(conn.dialect.name, row)

    def rowcount(self, conn: Tx, params: dict[str, Any]) -> int:
        """Rows the statement changed."""
        with self._cursor(conn, params) as cursor:
            return int(cursor.rowcount)

    def query(self, engine: Engine, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Every row, read with nothing left open (`reading`)."""
        with reading(engine) as conn:
            return self.rows(conn, params)


@dataclass(frozen=True)
class _Processing:
    """What a statement's text types do to its parameters and result values on one backend.

    None where nothing is done (every statement on SQLite): then the values pass as they are.
    Other types are left to the driver, as they always were.
    """

    binds: tuple[Callable[[Any], Any] | None, ...] | None
    results: tuple[Callable[[Any], Any] | None, ...] | None


def _processing(statement: Any, compiled: Any, names: tuple[str, ...]) -> _Processing:
    """The processors of the bound parameters (in `names`' order) and of the result columns."""
    dialect = compiled.dialect
    types = [compiled.binds[n].type for n in names]
    binds = tuple(t.bind_processor(dialect) if isinstance(t, EscapedText) else None for t in types)
    columns = list(getattr(statement, "exported_columns", None) or ())
    results = tuple(
        c.type.result_processor(dialect, None) if isinstance(c.type, EscapedText) else None
        for c in columns
    )
    return _Processing(binds if any(binds) else None, results if any(results) else None)


_MADE: weakref.WeakSet[Prepared] = weakref.WeakSet()

DIALECTS = ("sqlite", "postgresql")


def compile_all() -> int:
    """Compile every statement made so far for both backends; how many there are.

    For a process that forks others with the engine imported (a worker's fork server):
    compiled there, the SQL is in every process it forks, each of which would otherwise
    compile every statement again on first use (the similarity look-up is a 16-way union).
    """
    made = list(_MADE)
    for statement in made:
        for dialect in DIALECTS:
            statement.sql(dialect)
    return len(made)


def named(table: Table, *columns: str) -> dict[str, Any]:
    """Bound parameters named after `columns`, typed as the table's columns."""
    return {c: bindparam(c, type_=table.c[c].type) for c in columns}


def _insert_builder(
    table: Table, columns: tuple[str, ...], update: tuple[str, ...] | None, returning: bool = True
) -> Callable[[str], Any]:
    def build(dialect: str) -> Any:
        stmt: Any = _dialect(dialect).insert(table)
        stmt = stmt.values(named(table, *columns))
        if update is None:
            stmt = stmt.on_conflict_do_nothing()
            if not returning:
                return stmt
            return stmt.returning(next(iter(table.primary_key.columns)))
        keys = [c for c in columns if c not in update]
        return stmt.on_conflict_do_update(
            index_elements=keys, set_={c: stmt.excluded[c] for c in update}
        )

    return build


@cache
def _insert_ignore(table: Table, columns: tuple[str, ...]) -> Prepared:
    return Prepared(_insert_builder(table, columns, None))


@cache
def _insert_ignore_all(table: Table, columns: tuple[str, ...]) -> Prepared:
    return Prepared(_insert_builder(table, columns, None, returning=False))


@cache
def _upsert(table: Table, columns: tuple[str, ...], update: tuple[str, ...]) -> Prepared:
    return Prepared(_insert_builder(table, columns, update))


def insert_ignore(conn: Tx, table: Table, values: dict[str, Any]) -> bool:
    """Insert a row unless its primary/unique key exists; True when the row is new.

    This is the idempotency primitive: every side effect's record is keyed by
    checkpointed counters, so a node re-run after a crash inserts nothing twice.
    (RETURNING, not rowcount: psycopg reports 1 for a conflicting DO NOTHING.)
    """
    return _insert_ignore(table, tuple(values)).first(conn, values) is not None


def insert_ignore_all(conn: Tx, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """`insert_ignore` of many rows with the same columns, in one call to the driver."""
    if rows:
        _insert_ignore_all(table, tuple(rows[0])).execute_many(conn, rows)


def upsert(conn: Tx, table: Table, values: dict[str, Any], keys: list[str]) -> None:
    """Insert or overwrite a row identified by `keys`."""
    update = tuple(k for k in values if k not in keys)
    _upsert(table, tuple(values), update).execute(conn, values)
