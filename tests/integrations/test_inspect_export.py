"""`contreact export --format inspect`: a study as Inspect AI eval logs, read back by inspect_ai.

A 2 models × 2 replicates × 3 cycles stub batch is exported twice, as contreact's own
tables (JSON lines and CSV) and as an Inspect eval log; `inspect_ai.log.read_eval_log`
reads the log back, and its samples, messages, tool calls and scores must say what the
tables say. Operator words are the operator's, a run still going is exported as started,
and without the `inspect` extra the command says in one line what to install.

Needs the `inspect` extra (the `integrations` tier of `.ci/run` installs it).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.extras import needs

needs("inspect_ai", "inspect")

from inspect_ai.log import EvalLog, read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser  # noqa: E402

from contreact.analysis.metrics import TABLE1_KEYS
from contreact.analysis.pei.evaluation import set_level
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.registry import get_run
from contreact.config import parse_config
from contreact.engine.runner import start_run
from contreact.stub import StubServer
from support.backends import Backend
from support.batches import run_batch
from support.cli import cli_in_process
from support.stub import scripted_stub

pytestmark = pytest.mark.integrations

MODELS = ("stub-a", "stub-b")


@dataclass
class Exported:
    backend: Backend
    run_ids: list[str]
    tables: dict[str, list[dict[str, Any]]]
    """contreact's own export, as JSON lines (one list of rows per table)."""
    runs_csv: list[dict[str, str]]
    log: EvalLog


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    """Batch `s` (one run rated by hand), exported as JSON lines, CSV and an Inspect log."""
    root = tmp_path_factory.mktemp("inspect")
    backend = Backend("sqlite", root / "runs")
    with StubServer(models=list(MODELS)).start() as server:
        run_ids = run_batch(backend, server, "s", MODELS)
    set_level(backend.storage(), get_run(engine_for(backend.storage()), run_ids[1]), "judge", 7)
    for fmt in ("jsonl", "csv", "inspect"):
        args = ["export", "--batch", "s", "--format", fmt, "--out", str(root / fmt)]
        done = cli_in_process(backend, *args)
        assert done.returncode == 0, done.stderr
    (path,) = (root / "inspect").iterdir()
    tables = {p.stem: read_jsonl(p) for p in (root / "jsonl").iterdir()}
    with (root / "csv" / "runs.csv").open(encoding="utf-8", newline="") as fh:
        runs_csv = list(csv.DictReader(fh))
    yield Exported(backend, run_ids, tables, runs_csv, read_eval_log(str(path)))


def of_run(rows: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [row for row in rows if row["run_id"] == run_id]


def test_one_log_for_the_batch_each_run_a_sample(exported: Exported) -> None:
    log = exported.log
    assert log.status == "success" and log.eval.task == "s"
    assert log.location.endswith(".eval") and "_s_" in Path(log.location).name
    runs = exported.tables["runs"]
    assert [s.id for s in log.samples or []] == [r["run_id"] for r in runs] == exported.run_ids
    assert log.eval.dataset.sample_ids == exported.run_ids
    assert log.eval.model == "ollama/stub-a, ollama/stub-b"
    # Model text is untrusted: the viewer shows it as plain text, never as markdown or links.
    assert log.eval.viewer is not None and log.eval.viewer.trust_content is False
    # Each run's model, options, seed and provenance, as its RUN_START recorded them.
    described = log.eval.metadata["contreact"]["runs"] if log.eval.metadata else {}
    assert described.keys() == set(exported.run_ids)
    for row in runs:
        mine = described[row["run_id"]]
        assert (mine["model"], mine["seed"]) == (row["model"], row["start.seed"])
        assert mine["options"]["seed"] == row["start.options.seed"]
        assert mine["provenance"][0]["occasion"] == "start"
        assert mine["provenance"][0]["model"] == row["model"]
        assert (
            mine["provenance"][0]["versions"]["contreact"]
            == row["start.provenance.versions.contreact"]
        )


def test_scores_are_table_1_and_the_pei_level(exported: Exported) -> None:
    samples = {s.id: s for s in exported.log.samples or []}
    for row, cells in zip(exported.tables["runs"], exported.runs_csv, strict=True):
        scores = samples[row["run_id"]].scores or {}
        assert {k: scores[k].value for k in TABLE1_KEYS} == {k: row[k] for k in TABLE1_KEYS}
        assert {k: str(scores[k].value) for k in TABLE1_KEYS} == {k: cells[k] for k in TABLE1_KEYS}
        usage = samples[row["run_id"]].model_usage[f"ollama/{row['model']}"]
        assert (usage.input_tokens, usage.output_tokens) == (
            row["total_tokens_in"],
            row["total_tokens_out"],
        )
    (rating,) = exported.tables["pei"]
    pei = (samples[rating["run_id"]].scores or {})["pei/judge"]
    assert (rating["run_id"], pei.value, rating["level"]) == (exported.run_ids[1], 7, 7)
    assert pei.metadata and pei.metadata["manual"] is True
    assert not any(k.startswith("pei/") for k in samples[exported.run_ids[0]].scores or {})
    # The eval's results: each Table 1 value's mean over a model's replicates.
    results = exported.log.results
    assert results is not None and results.completed_samples == 4
    by_score = {s.name: s.metrics for s in results.scores}
    for model in MODELS:
        mine = [r["memory_tool_ops"] for r in exported.tables["runs"] if r["model"] == model]
        assert by_score["memory_tool_ops"][f"mean {model}"].value == sum(mine) / len(mine)


def test_messages_are_the_transcript_cycle_by_cycle(exported: Exported) -> None:
    events = exported.tables["events"]
    for sample in exported.log.samples or []:
        mine = [json.loads(e["payload"]) | {"_type": e["event_type"], "_cycle": e["cycle"]}
                for e in of_run(events, str(sample.id))]  # fmt: skip
        calls = [e for e in mine if e["_type"] == "LLM_INVOCATION"]
        messages = sample.messages
        # The system prompt as cycle 1 sent it, then each cycle's opening turn.
        assert messages[0].role == "system"
        assert messages[0].text == calls[0]["new_messages"][0]["content"]
        openings = [m for m in messages if isinstance(m, ChatMessageUser) and m.metadata
                    and m.metadata.get("opening")]  # fmt: skip
        starts = [e for e in mine if e["_type"] == "CYCLE_START"]
        assert [(m.metadata or {})["cycle"] for m in openings] == [1, 2, 3]
        assert [m.text for m in openings] == [e["opening"] for e in starts]
        # Every model answer, in order, with its text.
        answers = [m for m in messages if isinstance(m, ChatMessageAssistant)]
        assert [a.text for a in answers] == [c["response"]["content"] for c in calls]
        assert [((a.metadata or {})["cycle"], (a.metadata or {})["step"]) for a in answers] == [
            (c["_cycle"], c["step"]) for c in calls
        ]
        # The answer that closed each cycle is marked as that cycle's reflection.
        cycles = of_run(exported.tables["cycles"], str(sample.id))
        marked = [a for a in answers if (a.metadata or {}).get("reflection")]
        assert [(a.metadata or {})["cycle"] for a in marked] == [c["cycle"] for c in cycles]
        assert [a.text for a in marked] == [c["reflection"] for c in cycles]


def test_tool_calls_and_results_are_the_exported_tool_calls(exported: Exported) -> None:
    total = 0
    for sample in exported.log.samples or []:
        rows = of_run(exported.tables["tool_calls"], str(sample.id))
        called = {
            call.id: (call.function, call.arguments)
            for m in sample.messages
            if isinstance(m, ChatMessageAssistant)
            for call in m.tool_calls or []
        }
        results = [m for m in sample.messages if isinstance(m, ChatMessageTool)]
        assert [
            (r.tool_call_id, r.function, r.text, r.error is not None, (r.metadata or {})["cycle"])
            for r in results
        ] == [
            (row["call_id"], row["tool_name"], row["output"], row["error"], row["cycle"])
            for row in rows
        ]
        # Each result answers a call its model answer made, with the parameters it ran with.
        for r, row in zip(results, rows, strict=True):
            assert called[str(r.tool_call_id)] == (row["tool_name"], json.loads(row["parameters"]))
        # The agent's messages to the operator: the reply is the operator's.
        for r in results:
            assert (r.source == "operator") == (r.function == "send_message_to_operator")
        total += len(rows)
    assert total > 0
    assert any(
        row["tool_name"] == "send_message_to_operator" for row in exported.tables["tool_calls"]
    )


def test_an_interventions_message_is_the_operators(sqlite_backend: Backend, tmp_path: Path) -> None:
    backend = sqlite_backend
    script = {1: [{"content": "Heard."}]}
    with scripted_stub(script) as server:
        config = parse_config(
            {
                "run_id": "told",
                "model": "stub-model",
                "cycles": 1,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "storage": backend.storage_yaml(),
                "interventions": [{"at_cycle": 1, "operator_message": "Please stop."}],
            },
            "test",
        )
        assert start_run(config, backend.storage()).status == "completed"
    done = cli_in_process(backend, "export", "told", "-f", "inspect", "-o", str(tmp_path / "i"))
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "i").iterdir()
    log = read_eval_log(str(path))
    assert log.eval.task == "told" and log.eval.metadata and "run" in log.eval.metadata["contreact"]
    (sample,) = log.samples or []
    users = [(m.source, m.text) for m in sample.messages if isinstance(m, ChatMessageUser)]
    assert users == [
        ("input", "Cycle 1 begins."),
        ("operator", "A message from the operator: Please stop."),
    ]


def test_a_run_still_going_is_exported_as_started(sqlite_backend: Backend, tmp_path: Path) -> None:
    backend = sqlite_backend
    script = {
        1: [{"tool_calls": [{"name": "send_message_to_operator", "arguments": {"message": "Hi?"}}]}]
    }
    with scripted_stub(script) as server:
        config = parse_config(
            {
                "run_id": "waiting",
                "model": "stub-model",
                "cycles": 2,
                "ollama": {"host": server.url, "timeout_s": 20, "retries": 2},
                "storage": backend.storage_yaml(),
                "operator": {"mode": "queue"},
            },
            "test",
        )
        assert start_run(config, backend.storage()).status == "paused"
    done = cli_in_process(backend, "export", "waiting", "-f", "inspect", "-o", str(tmp_path / "i"))
    assert done.returncode == 0, done.stderr
    assert "runs still going: exported as started" in done.stderr
    (path,) = (tmp_path / "i").iterdir()
    log = read_eval_log(str(path))
    assert log.status == "started"
    assert log.eval.metadata and log.eval.metadata["contreact"]["still_going"] == ["waiting"]
    (sample,) = log.samples or []
    assert sample.metadata["still_going"] is True and sample.metadata["status"] == "paused"
    assert sample.completed_at is None and sample.metadata["cycles"] == 0
    # The agent's message waits for its reply: the call is there, its result not yet.
    (answer,) = [m for m in sample.messages if isinstance(m, ChatMessageAssistant)]
    assert [c.arguments for c in answer.tool_calls or []] == [{"message": "Hi?"}]
    assert not [m for m in sample.messages if isinstance(m, ChatMessageTool)]


def test_without_the_extra_it_says_what_to_install(
    exported: Exported, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for args, message in (
        (["-f", "inspect"], "name runs, or a batch with --batch NAME"),
        (["nope", "-f", "inspect"], "no run named nope"),
        (["a", "b"], "name one run (several runs export together only with --format inspect)"),
    ):
        result = cli_in_process(exported.backend, "export", *args)
        assert result.returncode == 2 and message in result.stderr, args
        assert len(result.stderr.strip().splitlines()) == 1
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # importing it now raises ImportError
    out = tmp_path / "never"
    bad = cli_in_process(
        exported.backend, "export", "--batch", "s", "-f", "inspect", "-o", str(out)
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "contreact: the inspect format needs Inspect AI, the `inspect` extra: "
        "pip install 'contreact[inspect]'"
    )
    assert not out.exists()


def test_runs_named_by_id_go_in_their_batchs_log(exported: Exported, tmp_path: Path) -> None:
    chosen = [exported.run_ids[2], exported.run_ids[0]]
    done = cli_in_process(exported.backend, "export", *chosen, "-f", "inspect", "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.iterdir()
    assert path.name == Path(exported.log.location).name  # the batch's log, by its fixed name
    # Inspect keeps a log's samples in its own order (by id).
    assert [s.id for s in read_eval_log(str(path)).samples or []] == sorted(chosen)
