"""A started stub server served in the foreground: one ready line, then until a signal.

Both ways of serving from a command line end here: `python -m contreact.stub` with a
scripted agent (`contreact.stub.__main__`) and with a real GGUF model
(`contreact.stub.real`). A parent process reads the URL from the `STUB READY` line (with
port 0 it is only known then) and stops the server with SIGTERM or SIGINT.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from contreact.stub.server import StubServer


def serve_until_signal(server: StubServer) -> int:
    """Print `STUB READY <url>` and serve until SIGTERM or SIGINT; then stop, and return 0."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    print(f"STUB READY {server.url}", flush=True)
    try:
        # A timed wait keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
    return 0
