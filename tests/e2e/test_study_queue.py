"""A study shared by workers on the queue: every run and every effect exactly once.

Workers are separate processes, each in its own folder, as on separate machines; they
share one PostgreSQL database and two stub Ollama hosts. The reference is the same study
driven on one machine without the queue (SQLite): a queued run must leave exactly what
that run left, whatever happened to the workers on the way.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import text

from contreact.stub import StubServer
from contreact.studies.batch import load_batch
from support.backends import Backend
from support.cli import cli_in_process
from support.workers import LEASE_S, Machine, run_record, table_rows, wait_for

MODELS = ["llama3.1:8b", "qwen3:8b"]


def study(path: Path, hosts: list[Any], storage: dict[str, Any], **fields: Any) -> Path:
    config = {
        "batch": "shared",
        "models": MODELS,
        "replicates": 2,
        "cycles": 3,
        "parallel": 2,
        "operator": {"mode": "auto", "no_reply": True},
        "ollama": {"hosts": hosts},
        "storage": storage,
        **fields,
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def one_run_study(tmp_path: Path, host: str, url: str) -> Path:
    """A study of one run of four cycles on `host`, stored at `url`."""
    return study(
        tmp_path / "study.yaml", [host], {"url": url}, models=MODELS[:1], replicates=1, cycles=4
    )


def reference(tmp_path: Path, config: Path) -> tuple[dict[str, Any], int]:
    """The study driven on one machine (SQLite, no queue): each run's record, and requests."""
    local = Backend("sqlite", tmp_path / "reference")
    spec = yaml.safe_load(config.read_text(encoding="utf-8"))
    with StubServer(models=MODELS).start() as a, StubServer(models=MODELS).start() as b:
        spec["ollama"] = {"hosts": [a.url, b.url]}
        spec["storage"] = {"data_dir": str(local.data_dir)}
        alone = tmp_path / "alone.yaml"
        alone.write_text(yaml.safe_dump(spec), encoding="utf-8")
        done = cli_in_process(local, "batch", str(alone), timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        requests = len(a.requests()) + len(b.requests())
    runs = [r.run_id for r in load_batch(alone).runs]
    return {r: run_record(local.storage(), r) for r in runs}, requests


def leases(storage: Any) -> list[tuple[str, str, bool]]:
    from contreact.checkpoints.engines import engine_for

    with engine_for(storage).connect() as conn:
        return [
            (str(r), str(w), bool(x))
            for r, w, x in conn.execute(
                text("SELECT run_id, worker, released FROM contreact_leases")
            )
        ]


def ended_cycles(storage: Any, run_id: str) -> int:
    from contreact.checkpoints.cycles import cycle_records
    from contreact.checkpoints.engines import engine_for

    return len(cycle_records(engine_for(storage), run_id))


def held_by(storage: Any, machine: Machine) -> list[str]:
    pid = f":{machine.proc.pid}"
    return [r for r, w, released in leases(storage) if w.endswith(pid) and not released]


def test_workers_share_a_study_and_one_killed_mid_run_loses_nothing(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    with (
        StubServer(models=MODELS, latency_ms=150).start() as a,
        StubServer(models=MODELS, latency_ms=150).start() as b,
    ):
        config = study(tmp_path / "study.yaml", [a.url, b.url], {"url": url})
        queued = cli_in_process(postgres_backend, "batch", str(config), "--no-work")
        assert queued.returncode == 0, queued.stderr
        assert "4 queued" in queued.stdout
        again = cli_in_process(postgres_backend, "batch", str(config), "--no-work")
        assert "0 queued, 4 already queued or running" in again.stdout  # enqueueing is idempotent

        storage = postgres_backend.storage()
        first = Machine(tmp_path, "m1", url, "--parallel", "2")
        second = Machine(tmp_path, "m2", url, "--parallel", "2")
        # Kill the first machine while a run it drives is between its cycles' model calls.
        victim = wait_for(
            lambda: [r for r in held_by(storage, first) if ended_cycles(storage, r) >= 1],
            timeout=120,
            what="the first worker ending a cycle",
        )
        held = held_by(storage, first)
        # Where the study stands, from any machine: every run, the worker holding each.
        shown = cli_in_process(postgres_backend, "batch", "--status", "shared", "--json")
        standing = {r["run_id"]: r for r in json.loads(shown.stdout)}
        assert len(standing) == 4
        assert standing[victim[0]]["worker"].endswith(f":{first.proc.pid}")
        first.signal(signal.SIGKILL)
        first.proc.wait(timeout=10)
        assert second.wait(timeout=240) == 0, second.output()
        requests = len(a.requests()) + len(b.requests())

    # Every run completed, taken over by the second worker after the lease lapsed.
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import get_run

    engine = engine_for(storage)
    expected, expected_requests = reference(tmp_path, config)
    for run_id, record in expected.items():
        assert get_run(engine, run_id).status == "completed"
        assert run_record(storage, run_id) == record, run_id
    assert victim and set(victim) <= set(held)
    # Only the model calls in flight at the kill were made twice.
    assert expected_requests <= requests <= expected_requests + len(held)
    assert "queued again" in second.output()


def test_a_frozen_worker_that_wakes_after_a_takeover_writes_nothing(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    with StubServer(models=MODELS, latency_ms=300).start() as a:
        config = one_run_study(tmp_path, a.url, url)
        assert cli_in_process(postgres_backend, "batch", str(config), "--no-work").returncode == 0
        storage = postgres_backend.storage()
        (run_id,) = [r.run_id for r in load_batch(config).runs]
        frozen = Machine(tmp_path, "m1", url)
        wait_for(lambda: ended_cycles(storage, run_id) >= 1, 120, "the first cycle")
        frozen.signal(signal.SIGSTOP)  # the machine freezes mid-run, its lease lapses
        try:
            second = Machine(tmp_path, "m2", url)
            assert second.wait(timeout=240) == 0, second.output()
            taken_over = table_rows(storage)
            requests_before_wake = len(a.requests())
        finally:
            frozen.signal(signal.SIGCONT)
        assert frozen.wait(timeout=120) == 0, frozen.output()
        time.sleep(LEASE_S / 2)
        requests_after_wake = len(a.requests())

    # The stale worker's process woke inside a model call or before its next write, and
    # every write it tried was refused: not a row more in any table a run writes.
    assert table_rows(storage) == taken_over
    assert "lost its lease to another worker" in frozen.output()
    assert "Traceback" not in frozen.output() + frozen.child_logs()
    assert "wrote nothing more to the run" in frozen.child_logs()
    assert requests_after_wake - requests_before_wake <= 1  # at most its call in flight
    expected, _ = reference(tmp_path, config)
    assert run_record(storage, run_id) == expected[run_id]


def test_a_worker_needs_the_queues_database(tmp_path: Path) -> None:
    local = Backend("sqlite", tmp_path / "runs")
    done = cli_in_process(local, "worker")
    assert done.returncode == 2
    assert "PostgreSQL" in done.stderr and "contreact batch CONFIG" in done.stderr


def test_no_work_needs_the_queues_database(tmp_path: Path) -> None:
    local = Backend("sqlite", tmp_path / "runs")
    with StubServer(models=MODELS).start() as a:
        config = study(tmp_path / "s.yaml", [a.url], {"data_dir": str(local.data_dir)})
        done = cli_in_process(local, "batch", str(config), "--no-work")
    assert done.returncode == 2 and "PostgreSQL" in done.stderr


def test_a_model_no_host_serves_stops_the_study_before_anything_is_queued(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    with StubServer(models=MODELS[:1]).start() as a:
        host = a.url
        config = study(tmp_path / "study.yaml", [host], {"url": url})
        done = cli_in_process(postgres_backend, "batch", str(config))
    assert done.returncode == 2
    assert MODELS[1] in done.stderr and host in done.stderr and "not started" in done.stderr
    from contreact.checkpoints.engines import engine_for

    with engine_for(postgres_backend.storage()).connect() as conn:
        queue = conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar()
        jobs = (
            0
            if queue is None
            else conn.execute(text("SELECT count(*) FROM procrastinate_jobs")).scalar()
        )
    assert jobs == 0


def test_runs_go_to_the_host_with_free_slots_and_never_past_its_slots(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    storage = postgres_backend.storage()
    with (
        StubServer(models=MODELS, latency_ms=100).start() as a,
        StubServer(models=MODELS, latency_ms=100).start() as b,
    ):
        hosts = [{"url": a.url, "parallel": 1}, {"url": b.url, "parallel": 1}]
        config = study(tmp_path / "study.yaml", hosts, {"url": url}, cycles=2)
        assert cli_in_process(postgres_backend, "batch", str(config), "--no-work").returncode == 0
        worker = Machine(tmp_path, "m1", url, "--parallel", "3")
        from contreact.checkpoints.engines import engine_for

        busiest: dict[str, int] = {}
        while worker.proc.poll() is None:
            with engine_for(storage).connect() as conn:
                for host, n in conn.execute(
                    text(
                        "SELECT l.host, count(*) FROM contreact_leases l JOIN procrastinate_jobs j"
                        " ON j.id = l.job_id WHERE NOT l.released AND j.status = 'doing'"
                        " GROUP BY l.host"
                    )
                ):
                    busiest[host] = max(busiest.get(host, 0), int(n))
            time.sleep(0.05)
        assert worker.wait(10) == 0, worker.output()
        # Three slots of the worker, but one run per host: each host served one at a time.
        assert busiest == {a.url: 1, b.url: 1}
        assert len(a.requests()) > 0 and len(b.requests()) > 0


def test_a_stopped_worker_leaves_its_run_resumable_and_another_finishes_it(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    storage = postgres_backend.storage()
    with StubServer(models=MODELS, latency_ms=200).start() as a:
        config = one_run_study(tmp_path, a.url, url)
        (run_id,) = [r.run_id for r in load_batch(config).runs]
        assert cli_in_process(postgres_backend, "batch", str(config), "--no-work").returncode == 0
        stopped = Machine(tmp_path, "m1", url)
        wait_for(lambda: ended_cycles(storage, run_id) >= 1, 120, "the first cycle")
        stopped.proc.send_signal(signal.SIGTERM)  # the worker alone, as systemd stops it
        assert stopped.proc.wait(timeout=30) == 130, stopped.output()
        from contreact.checkpoints.engines import engine_for
        from contreact.checkpoints.registry import get_run

        left = get_run(engine_for(storage), run_id)
        assert left.status == "running" and not left.driven  # interrupted, resumable
        assert ended_cycles(storage, run_id) < 4
        finisher = Machine(tmp_path, "m2", url)
        assert finisher.wait(timeout=120) == 0, finisher.output()
    assert get_run(engine_for(storage), run_id).status == "completed"
    expected, _ = reference(tmp_path, config)
    assert run_record(storage, run_id) == expected[run_id]


def test_a_worker_serving_forever_takes_a_study_enqueued_later(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    storage = postgres_backend.storage()
    from contreact.studies.queue import prepare

    prepare(storage)  # the database holds the study queue, with no study on it yet
    waiting = Machine(tmp_path, "m1", url, "--forever")
    try:
        with StubServer(models=MODELS).start() as a:
            config = study(
                tmp_path / "study.yaml", [a.url], {"url": url}, models=MODELS[:1], cycles=1
            )
            time.sleep(3)  # the worker is up and idle before the study exists
            assert waiting.proc.poll() is None, waiting.output()
            assert (
                cli_in_process(postgres_backend, "batch", str(config), "--no-work").returncode == 0
            )
            runs = [r.run_id for r in load_batch(config).runs]
            from contreact.checkpoints.engines import engine_for
            from contreact.checkpoints.registry import get_run

            def done() -> bool:
                try:
                    return all(get_run(engine_for(storage), r).status == "completed" for r in runs)
                except Exception:
                    return False

            wait_for(done, 120, "the study completing")
            time.sleep(1)
            assert waiting.proc.poll() is None  # still serving
    finally:
        waiting.proc.send_signal(signal.SIGTERM)
    assert waiting.proc.wait(timeout=30) == 130


def test_doctor_checks_the_study_queue_of_a_postgresql_study(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    url = str(postgres_backend.db_url)
    with StubServer(models=MODELS).start() as a:
        config = study(tmp_path / "study.yaml", [a.url], {"url": url})
        before = cli_in_process(postgres_backend, "doctor", str(config))
        assert cli_in_process(postgres_backend, "batch", str(config), "--no-work").returncode == 0
        after = cli_in_process(postgres_backend, "doctor", str(config))
    assert before.returncode == 0, before.stdout
    assert "queue" in before.stdout and "made in the database by the first" in before.stdout
    assert after.returncode == 0 and "4 runs queued or in hand, 0 workers beating" in after.stdout


def test_studies_put_on_a_new_database_at_once_are_each_queued_once(
    tmp_path: Path, postgres_backend: Backend
) -> None:
    """Three `batch --no-work` at once on a new database: each makes what it needs, once.

    contreact's tables (Alembic, under its lock), LangGraph's (under the saver's lock) and
    the queue's (under `prepare`'s) are made by whichever process comes first; the others
    find them made. A worker never makes them: it needs a study on the queue first.
    """
    from support.cli import cli_env
    from support.forked import run_together

    url = str(postgres_backend.db_url)
    with StubServer(models=MODELS).start() as a:
        configs = [
            study(tmp_path / f"s{i}.yaml", [a.url], {"url": url}, batch=f"s{i}", cycles=1)
            for i in range(3)
        ]
        commands = [[*postgres_backend.cli_args, "batch", str(c), "--no-work"] for c in configs]
        ended = run_together(commands, cli_env(), tmp_path)
    assert [e.code for e in ended] == [0, 0, 0], [e.output for e in ended]
    from contreact.checkpoints.engines import engine_for

    with engine_for(postgres_backend.storage()).connect() as conn:
        queued = conn.execute(
            text("SELECT queue_name, count(*) FROM procrastinate_jobs GROUP BY 1 ORDER BY 1")
        ).all()
    assert [(str(q), int(n)) for q, n in queued] == [
        (f"contreact.study.s{i}", len(MODELS) * 2) for i in range(3)
    ]
