"""The tables `contreact.load` returns: typed, complete, in a reader's order, the same as files.

A batch of one model × 2 replicates × 3 cycles, with an operator message and a memory wipe
as interventions, and the simulated agent writing to the operator in cycle 2. Every table
has the run's `batch`; `replicate` is an integer; times are timezone-aware datetimes; the
operator's messages and the interventions have tables of their own; and parquet keeps it
all, types included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pandas.api.types import is_datetime64_any_dtype
from pandas.testing import assert_frame_equal

import contreact
from contreact.analysis.frames import TABLES, RunTables, sorted_rows
from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_in_process

INTERVENTIONS = [
    {"at_cycle": 2, "operator_message": "The operator says: keep a diary."},
    {"at_cycle": 3, "memory": {"clear": True}},
]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Backend, RunTables]]:
    backend = Backend("sqlite", tmp_path_factory.mktemp("model") / "runs")
    with StubServer(models=["stub-a"]).start() as server:
        run_batch(backend, server, "dm", ["stub-a"], interventions=INTERVENTIONS)
    yield backend, contreact.load(batch="dm", storage=backend.data_dir)


def test_every_table_has_the_batch_and_typed_columns(made: tuple[Backend, RunTables]) -> None:
    _, study = made
    for name, table in study.tables().items():
        assert "batch" in table.columns and set(table.batch) <= {"dm"}, name
    runs = study.runs
    assert str(runs.replicate.dtype) == "Int64" and list(runs.replicate) == [1, 2]
    for table, column in (
        (runs, "created_at"),
        (runs, "updated_at"),
        (study.events, "timestamp"),
        (study.operator_messages, "replied_at"),
        (study.interventions, "timestamp"),
    ):
        assert is_datetime64_any_dtype(table[column]) and str(table[column].dt.tz) == "UTC"
    assert (runs.updated_at >= runs.created_at).all()


def test_operator_messages_and_interventions_have_tables(made: tuple[Backend, RunTables]) -> None:
    _, study = made
    events = study.events
    sent = events[events.event_type == "OPERATOR_MESSAGE"]
    messages = study.operator_messages
    assert len(messages) == len(sent) == 2  # cycle 2 of each run
    for row, (_, event) in zip(messages.itertuples(), sent.iterrows(), strict=True):
        payload = json.loads(event.payload)
        assert (row.run_id, row.cycle, row.seq) == (event.run_id, event.cycle, event.seq)
        assert (row.message, row.reply) == (payload["message"], payload["reply"])
        assert row.replied_at == event.timestamp and "operator" in row.message.lower()
    acted = study.interventions
    assert list(zip(acted.run_id, acted.cycle, acted.kind, strict=True)) == [
        (run_id, cycle, kind)
        for run_id in study.runs.run_id
        for cycle, kind in ((2, "operator_message"), (3, "memory"))
    ]
    assert json.loads(acted.detail.iloc[0])["message"] == INTERVENTIONS[0]["operator_message"]


def test_rows_are_sorted_by_run_cycle_and_sequence(made: tuple[Backend, RunTables]) -> None:
    _, study = made
    for name in ("events", "tool_calls", "operator_messages", "interventions"):
        table = study.tables()[name]
        keys = list(zip(table.run_id, table.cycle, table.seq, strict=True))
        assert keys == sorted(keys), name
    # Whatever order the runs finished in: r2 before r10, and each run's rows in order.
    rows = [
        {"run_id": f"b.m.r{n}", "cycle": c, "seq": s}
        for n, c, s in ((10, 1, 1), (2, 2, 5), (2, 1, 2), (2, 1, 1), (1, 3, 9))
    ]
    ordered = [(r["run_id"], r["cycle"], r["seq"]) for r in sorted_rows("events", rows)]
    assert ordered == [
        ("b.m.r1", 3, 9), ("b.m.r2", 1, 1), ("b.m.r2", 1, 2), ("b.m.r2", 2, 5), ("b.m.r10", 1, 1)
    ]  # fmt: skip


def test_parquet_keeps_the_types(made: tuple[Backend, RunTables], tmp_path: Path) -> None:
    backend, study = made
    out = tmp_path / "parquet"
    done = cli_in_process(backend, "export", "--batch", "dm", "-f", "parquet", "--out", str(out))
    assert done.returncode == 0, done.stderr
    for name in TABLES:
        back = pd.read_parquet(out / f"{name}.parquet")
        assert_frame_equal(back, study.tables()[name], check_dtype=True, obj=name)
        assert dict(back.dtypes) == dict(study.tables()[name].dtypes), name
