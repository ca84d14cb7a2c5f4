"""Model text never reaches the terminal raw (docs/faults.md).

A model that writes `ESC ] 0 ; title BEL` renames the operator's window, `ESC [ 2 J` clears
the screen; printed raw by a progress line, `show`, `status`, `memory` or a CSV export,
the text would act on the terminal instead of being read. Every CLI view shows such
characters as visible escapes; JSON output keeps JSON's own escapes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from contreact.text.terminal import visible
from support.backends import Backend
from support.cli import cli_in_process
from support.runs import write_config
from support.stub import scripted_stub

# Window title (OSC 0), clear screen (CSI 2J), colour, 8-bit CSI (C1), a carriage return
# that would overwrite the line, NUL, a bidi override, and OSC 52 (write the clipboard).
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b31m\rover\x00nul\u202eevil\x1b]52;c;aGk=\x07"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in _strings(item)]


def test_visible_escapes_every_control_character_and_keeps_text() -> None:
    assert visible(HOSTILE) == (
        "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x9b31m\\x0dover\\x00nul\\u202eevil"
        "\\x1b]52;c;aGk=\\x07"
    )
    assert visible("line one\n\tline two · café 日本") == "line one\n\tline two · café 日本"
    assert visible("a\ud800b") == "a\\ud800b"  # a lone surrogate prints instead of crashing
    assert visible(42) == "42"


def test_no_cli_view_prints_model_text_raw(tmp_path: Path, sqlite_backend: Backend) -> None:
    script = {
        1: [
            {"tool_calls": [{"name": "write", "arguments": {"key": HOSTILE, "value": HOSTILE}}]},
            {"content": f"Reflection: [bold]{HOSTILE}[/bold]"},
        ]
    }
    with scripted_stub(script) as server:
        config = write_config(tmp_path / "c.yaml", sqlite_backend, cycles=1)
        done = cli_in_process(sqlite_backend, "run", str(config), "--host", server.url)
    assert done.returncode == 0, done.stderr
    views = {
        "run": done.stdout,
        "show": cli_in_process(sqlite_backend, "show", "run-1").stdout,
        "status": cli_in_process(sqlite_backend, "status", "run-1").stdout,
        "memory": cli_in_process(sqlite_backend, "memory", "run-1").stdout,
        "export csv": cli_in_process(sqlite_backend, "export", "run-1", "--format", "csv").stdout,
    }
    for name, text in views.items():
        assert not RAW.search(text), f"{name} printed a control character raw: {text!r}"
    # The text is still there to read, escaped, markup included as typed.
    assert "\\x1b]0;pwned\\x07" in views["run"]
    assert "[bold]\\x1b]0;pwned\\x07\\x1b[2J" in views["show"]
    assert "\\x1b[2J" in views["memory"] and "\\x1b[2J" in views["export csv"]

    # JSON keeps JSON's escapes: parsed back, the model's text is exact.
    exported = cli_in_process(sqlite_backend, "export", "run-1").stdout
    assert "\x1b" not in exported and "\x07" not in exported
    events = [json.loads(line) for line in exported.splitlines()]
    assert any(HOSTILE in text for e in events for text in _strings(e["payload"]))
    memory = json.loads(cli_in_process(sqlite_backend, "memory", "run-1", "--json").stdout)
    assert memory == {HOSTILE: HOSTILE}
