"""Alembic's entry for contreact's tables: run on the connection `checkpoints.migrate` holds.

There is no `alembic.ini` and no URL here: the migrations run only inside contreact, in the
transaction (and under the lock) of the connection handed over in `config.attributes`.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext

from contreact.checkpoints.migrations import VERSION_TABLE, ours
from contreact.checkpoints.schema import metadata
from contreact.checkpoints.stored_text import EscapedText


def render_item(kind: str, item: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Autogenerate writes a stored-text column as the plain type it is in the database."""
    if kind == "type" and isinstance(item, EscapedText):
        return f"sa.{item.impl_instance!r}"
    return False


def run_migrations() -> None:
    """Upgrade on the handed-over connection, inside its transaction."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "contreact's migrations run through contreact.checkpoints.migrate, on an open "
            "connection; there is no alembic.ini"
        )
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_item=render_item,
        include_name=ours,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
