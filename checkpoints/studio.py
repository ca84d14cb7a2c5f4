"""proto"""

from __future__ import annotations
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from checkpoints.db import resolve_storage


@asynccontextmanager
async def studio_checkpointer() -> AsyncIterator[BaseCheckpointSaver]:
    storage = await asyncio.to_thread(resolve_storage)
    print("STUDIO STORAGE", storage, flush=True)
    await asyncio.to_thread(storage.sqlite_path.parent.mkdir, parents=True, exist_ok=True)
    async with aiosqlite.connect(str(storage.sqlite_path), timeout=30) as conn:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        yield saver
