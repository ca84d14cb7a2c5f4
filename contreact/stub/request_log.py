"""The stub's record of the requests it answered.

Tests assert on what the real client sent (the body, in order) and on how the stub
answered it (the fault it played, the status); subprocess users read the same record over
``/_stub/requests`` or from a JSON-lines file. Numbering restarts at 1 on a reset, so a
test can name "the second request" without knowing what came before it.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import IO, Any

from contreact.stub.faults import Fault

__all__ = ["RequestLog"]


class RequestLog:
    """Numbered request records, in memory and optionally appended to a JSONL file.

    Thread-safe: the handler threads add to it while a test reads it.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        """Record in memory, and in ``path`` (appended) between :meth:`open` and :meth:`close`."""
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        self._next_n = 1
        self._file: IO[str] | None = None

    def open(self) -> None:
        """Start appending to the file, if there is one (its folder is made)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._file = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        """Stop appending to the file; the in-memory record stays."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def add(self, path: str, body: Any, fault: Fault | None, status: int) -> None:
        """Record one request: its path, decoded body, the fault played and the status."""
        with self._lock:
            entry = {
                "n": self._next_n,
                "path": path,
                "body": body,
                "fault": fault.kind if fault else None,
                "status": status,
            }
            self._next_n += 1
            self._entries.append(entry)
            if self._file is not None:
                self._file.write(json.dumps(entry) + "\n")
                self._file.flush()

    def entries(self, path: str | None) -> list[dict[str, Any]]:
        """Copies of the records to ``path`` (every path when ``None``), oldest first."""
        with self._lock:
            return copy.deepcopy([e for e in self._entries if path is None or e["path"] == path])

    def clear(self) -> None:
        """Forget every record; numbering restarts at 1."""
        with self._lock:
            self._entries.clear()
            self._next_n = 1
