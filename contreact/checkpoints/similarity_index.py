"""The similarity monitor's persisted index: which earlier reflections may resemble a new one.

The monitor compares each reflection with the newest earlier ones and with the older
ones that share a locality-sensitive hash key with it (MinHash bands, computed by
`text.similarity.index_keys`). The keys are rows here, written in the transaction that
records the cycle, so the index survives a restart without re-reading the past, and a
look-up reads a bounded number of rows per key (the newest few) whatever the run's
length: a cycle's check costs the same early and late in a long run.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Integer, bindparam, literal_column, select, true, union_all

from contreact.checkpoints.cycles import Note
from contreact.checkpoints.schema import cycles, similarity_keys
from contreact.checkpoints.statements import Prepared, insert_ignore_all
from contreact.checkpoints.transactions import Tx


def insert_keys(conn: Tx, run_id: str, cycle: int, keys: Sequence[int]) -> None:
    """Index `cycle`'s reflection under `keys` (idempotent), in the caller's transaction.

    One call to the driver for all of them: sixteen statements of their own were half of
    a PostgreSQL run's SQL round trips per model call.
    """
    rows = [{"run_id": run_id, "key": key, "cycle": cycle} for key in dict.fromkeys(keys)]
    insert_ignore_all(conn, similarity_keys, rows)


def _similar_notes(count: int) -> Prepared:
    def build(dialect: str) -> object:
        t = similarity_keys
        run_id = bindparam("run_id", type_=t.c.run_id.type)
        parts = [
            select(t.c.cycle)
            .where(
                t.c.run_id == run_id,
                t.c.key == bindparam(f"k{i}", type_=t.c.key.type),
                t.c.cycle < bindparam("before", type_=Integer),
            )
            .order_by(t.c.cycle.desc())
            .limit(bindparam("per_key", type_=Integer))
            .offset(bindparam("skip", type_=Integer))
            .subquery()
            for i in range(count)
        ]
        found = union_all(*(select(p.c.cycle) for p in parts))
        columns = (cycles.c.cycle, cycles.c.opening, cycles.c.reflection)
        if dialect != "postgresql":
            return (
                select(*columns)
                .where(cycles.c.run_id == run_id, cycles.c.cycle.in_(found))
                .order_by(cycles.c.cycle)
            )
        # PostgreSQL plans a prepared statement once, for any parameters, from the tables'
        # statistics. Without them (autovacuum off) it took `run_id = $1` for a handful of
        # rows and `cycle IN (...)` became a hash of every cycle of the run, read at every
        # cycle. One primary-key look-up per cycle found, in a lateral
        # subquery (its LIMIT keeps it from being merged into a join), reads only those.
        wanted = select(found.subquery().c.cycle).distinct().subquery("wanted")
        note = (
            select(*columns)
            .where(cycles.c.run_id == run_id, cycles.c.cycle == wanted.c.cycle)
            .limit(literal_column("1"))
            .lateral("note")
        )
        return (
            select(note.c.cycle, note.c.opening, note.c.reflection)
            .select_from(wanted)
            .join(note, true())
            .order_by(note.c.cycle)
        )

    return Prepared(build)


_LOOKUPS: dict[int, Prepared] = {}


def lookup(count: int) -> Prepared:
    """The look-up of notes indexed under any of `count` keys (one statement per count)."""
    found = _LOOKUPS.get(count)
    if found is None:
        found = _LOOKUPS[count] = _similar_notes(count)
    return found


def similar_notes(
    conn: Tx, run_id: str, keys: Sequence[int], *, before: int, per_key: int
) -> list[Note]:
    """Notes of cycles below `before` indexed under any of `keys`, in cycle order.

    Of each key, only the newest `per_key` cycles: at most `len(keys) * per_key` notes,
    read through the primary key, however long the run.
    """
    if not keys or per_key <= 0:
        return []
    params: dict[str, object] = {"run_id": run_id, "before": before, "per_key": per_key, "skip": 0}
    params.update({f"k{i}": key for i, key in enumerate(keys)})
    rows = lookup(len(keys)).rows(conn, params)
    return [Note(int(c), str(o or ""), str(r)) for c, o, r in rows]
