"""One clear line for each error a person meets: no exception class, no library's raw words.

Each is the command as a person types it: a config whose aliases stand for billions of
values (inside `reflection.schema`, and in a batch config), an export to a folder or past
a file, a tool or hook that cannot be loaded. Each ends with exit 2 and one line on
stderr, before anything runs.
"""

from __future__ import annotations

from pathlib import Path

from support.backends import Backend
from support.cli import cli, cli_in_process
from support.runs import write_config

LAUGHS = "".join(
    f"    {name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
"""Nine lines of nine aliases each: 9**9 values."""


def one_line(done: object) -> str:
    stderr = done.stderr  # type: ignore[attr-defined]
    assert done.returncode == 2, stderr  # type: ignore[attr-defined]
    assert stderr.count("\n") == 1 and stderr.startswith("contreact: "), stderr
    assert "Error" not in stderr and "Errno" not in stderr and "Traceback" not in stderr
    return str(stderr.strip())


def test_an_alias_bomb_in_the_reflection_schema_is_one_line(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    config = tmp_path / "bomb.yaml"
    config.write_text(
        "run_id: bomb\nmodel: stub-model\nreflection:\n  format: json\n  schema:\n" + LAUGHS,
        encoding="utf-8",
    )
    line = one_line(cli(sqlite_backend, "run", str(config), timeout=60))
    assert line == (
        f"contreact: {config}: line 11: its YAML aliases stand for more than 100,000 values; "
        "write the values out (aliases that repeat aliases multiply)"
    )
    batch = tmp_path / "bombs.yaml"
    batch.write_text(
        "batch: b\nmodels: [stub-model]\nreflection:\n  format: json\n  schema:\n" + LAUGHS,
        encoding="utf-8",
    )
    assert "aliases stand for more than" in one_line(cli(sqlite_backend, "batch", str(batch)))


def test_an_export_to_a_folder_or_past_a_file_is_one_line(
    tmp_path: Path, sqlite_backend: Backend, stub: object
) -> None:
    config = write_config(
        tmp_path / "c.yaml",
        sqlite_backend,
        run_id="out",
        cycles=1,
        ollama={"host": stub.url},  # type: ignore[attr-defined]
    )
    assert cli_in_process(sqlite_backend, "run", str(config)).returncode == 0
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine", encoding="utf-8")

    def export(*args: str) -> str:
        return one_line(cli_in_process(sqlite_backend, "export", *args))

    assert export("out", "--format", "csv", "--out", str(tmp_path)) == (
        f"contreact: --out {tmp_path} is a folder: give the file to write, e.g. "
        f"{tmp_path / 'out.csv'}"
    )
    assert export("out", "--format", "csv", "--out", str(a_file / "x.csv")) == (
        f"contreact: --out {a_file / 'x.csv'}: {a_file} is a file, not a folder"
    )
    assert export("--batch", "nobatch", "--format", "csv", "--out", str(a_file)).startswith(
        "contreact: "
    )
    assert a_file.read_text(encoding="utf-8") == "mine"


def test_a_tool_or_hook_that_cannot_load_is_one_line_before_the_run_starts(
    tmp_path: Path, sqlite_backend: Backend
) -> None:
    (tmp_path / "lab_tools.py").write_text(
        'def probe(text: str) -> str:\n    """Echo.\n\n    Args:\n        text: It.\n    """\n'
        "    return text\n\n\nclass Guard:\n    def on_cycle_end(self, info):\n        pass\n",
        encoding="utf-8",
    )
    misspelt = write_config(
        tmp_path / "tool.yaml",
        sqlite_backend,
        run_id="t",
        tools={"add": ["lab_tools:prbe"], "entry_points": False},
    )
    assert one_line(cli(sqlite_backend, "run", str(misspelt))) == (
        "contreact: tool lab_tools:prbe cannot be loaded: lab_tools has no prbe "
        "(did you mean probe?)"
    )
    a_class = write_config(
        tmp_path / "hook.yaml",
        sqlite_backend,
        run_id="h",
        tools={"entry_points": False},
        hooks=["lab_tools:Guard"],
    )
    assert one_line(cli(sqlite_backend, "run", str(a_class))).startswith(
        "contreact: hook lab_tools:Guard is a class whose on_cycle_end take `self`: "
    )
    listed = cli_in_process(sqlite_backend, "list", "--json")
    assert listed.stdout.strip() in ("[]", "")  # neither run was registered
