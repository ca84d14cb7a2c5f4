"""`contreact batch CONFIG`: models × replicates with bounded concurrency, progress, one summary.

While the batch runs, a terminal shows a live table (run, model, cycle i/N, step, status,
tokens/s, ETA); a pipe or a log file gets one plain line per cycle per run. Progress is
read from the database (`contreact.studies.status`), which is also how `batch --status NAME`
shows a batch that runs elsewhere. With `--json`, stdout holds only the summary document
and the progress lines go to stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from contreact.cli.app import BadInputError, command, err, out, storage
from contreact.cli.hints import runnable
from contreact.cli.output import cell, emit_json, emit_table

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from contreact.studies.status import BatchWatch, CycleDone

LIVE_COLUMNS = ["run", "model", "cycle", "step", "status", "tok/s", "ETA"]
STATUS_COLUMNS = [
    "run",
    "model",
    "cycle",
    "step",
    "status",
    "tok/s",
    "ETA",
    "host",
    "driver",
    "worker",
]
POLL_S = 0.5
WATCH_S = 1.0
"""How often `batch --status --watch` reads the database."""


def _live_rows(watch: BatchWatch) -> list[list[str]]:
    from contreact.studies.status import duration

    now = time.time()
    rows = []
    for v in watch.views.values():
        rate = "" if v.tokens_per_s is None else f"{v.tokens_per_s:.1f}"
        eta = duration(v.eta_seconds(now)) if v.status != "queued" else ""
        step = str(v.step) if v.status == "running" else ""
        rows.append([v.run_id, v.model, v.cycle_shown, step, v.status, rate, eta])
    return rows


def _live_table(watch: BatchWatch) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(*LIVE_COLUMNS)
    for row in _live_rows(watch):
        table.add_row(*(Text(c) for c in row))
    return table


def cycle_line(done: CycleDone) -> str:
    """The plain line for a finished cycle."""
    from contreact.studies.status import duration

    rate = "" if done.tokens_per_s is None else f" · {done.tokens_per_s:.1f} tok/s"
    return (
        f"  {done.run_id}: cycle {done.cycle}/{done.last_cycle} done in "
        f"{duration(done.seconds)}{rate} · ETA {duration(done.eta_s)}"
    )


class Follower:
    """Polls the batch's progress in a thread and shows it: live table or plain lines."""

    def __init__(self, watch: BatchWatch, live: bool, lines: Console) -> None:
        self.watch, self.live, self.lines = watch, live, lines
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batch-progress", daemon=True)
        self._display: Any = None

    def say(self, text: str) -> None:
        """A line above the live table (or a plain line)."""
        self.lines.print(text, markup=False)

    def __enter__(self) -> Follower:
        self.watch.poll()
        if self.live:
            from rich.live import Live

            self._display = Live(
                _live_table(self.watch), console=self.lines, refresh_per_second=4, transient=True
            )
            self._display.start()
        self._thread.start()
        return self

    def _tick(self) -> None:
        from contreact.cli.progress import note_line

        for done in self.watch.poll():
            if not self.live:
                self.say(cycle_line(done))
        for note in self.watch.notes:
            self.say(f"  {note.run_id}: {note_line(note)}")
        self.watch.notes.clear()
        if self._display is not None:
            self._display.update(_live_table(self.watch))

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._tick()
            except Exception:  # noqa: BLE001, S110 - a missed poll is harmless; the next counts
                pass

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            self._tick()  # the cycles that ended since the last poll
        finally:
            if self._display is not None:
                self._display.stop()


def _summary(results: list[Any]) -> None:
    emit_table(
        ["run", "model", "status", "cycles", "memory ops", "to operator", "final keys", "host"],
        [
            [
                r.run_id,
                r.model,
                r.status,
                r.cycles,
                r.memory_ops,
                r.operator_messages,
                r.final_memory_keys,
                r.host,
            ]
            for r in results
        ],
    )


def _status_rows(watch: BatchWatch) -> list[list[str]]:
    views = list(watch.views.values())
    return [
        [*row, v.host, v.driver, v.worker] for row, v in zip(_live_rows(watch), views, strict=True)
    ]


def _host_lines(watch: BatchWatch) -> list[str]:
    hosts: dict[str, list[str]] = {}
    for v in watch.views.values():
        if v.host:
            hosts.setdefault(v.host, []).append(v.status)
    return [
        f"{host}: " + ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
        for host, statuses in hosts.items()
    ]


def _snapshot(watch: BatchWatch) -> None:
    emit_table(STATUS_COLUMNS, _status_rows(watch))
    for line in _host_lines(watch):
        out.print(line, markup=False)


def _status(name: str, as_json: bool, follow: bool) -> None:
    from contreact.checkpoints.engines import engine_for
    from contreact.studies.status import BatchWatch

    if follow and as_json:
        raise BadInputError("--watch follows the table as it changes; --json prints it once")
    where = storage().existing()
    watch = BatchWatch.of_batch(engine_for(where), name)
    if not watch.views:
        raise BadInputError(f"no runs of a batch named {name} in {where.shown}")
    watch.poll()
    if as_json:
        now = time.time()
        emit_json(
            [
                {
                    "run_id": v.run_id,
                    "model": v.model,
                    "cycle": max(v.cycle, v.done),
                    "cycles_done": v.done,
                    "cycles_planned": v.last_cycle,
                    "step": v.step,
                    "status": v.status,
                    "tokens_per_s": v.tokens_per_s,
                    "eta_s": v.eta_seconds(now),
                    "host": v.host,
                    "driver": v.driver,
                    "worker": v.worker,
                }
                for v in watch.views.values()
            ]
        )
        return
    if not follow:
        _snapshot(watch)
        return
    try:
        if out.is_terminal:
            _watch_live(name, watch)
        else:
            _watch_lines(watch)
    except KeyboardInterrupt:
        return  # Ctrl-C is how a person stops watching, as with `top`
    statuses = {v.status for v in watch.views.values()}
    if statuses - {"completed", "paused"}:
        raise typer.Exit(1)
    if "paused" in statuses:
        raise typer.Exit(3)


def _settled(watch: BatchWatch) -> bool:
    from contreact.studies.status import SETTLED

    return all(v.status in SETTLED for v in watch.views.values())


def _watch_live(name: str, watch: BatchWatch) -> None:
    """The table redrawn in place as it changes, like `top`, until every run settles."""
    from rich.console import Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from contreact.cli.progress import note_line

    def view() -> Group:
        table = Table(*STATUS_COLUMNS, title=f"batch {name} · {time.strftime('%H:%M:%S')}")
        for row in _status_rows(watch):
            table.add_row(*(Text(cell(c)) for c in row))
        hosts = [Text(line) for line in _host_lines(watch)]
        return Group(table, *hosts, Text("Ctrl-C stops watching", style="dim"))

    with Live(view(), console=out, auto_refresh=False) as live:
        while not _settled(watch):
            time.sleep(WATCH_S)
            for done in watch.poll():
                live.console.print(cycle_line(done), markup=False)
            for note in watch.notes:
                live.console.print(f"  {note.run_id}: {note_line(note)}", markup=False)
            watch.notes.clear()
            live.update(view(), refresh=True)


def _watch_lines(watch: BatchWatch) -> None:
    """A pipe's watch: the table once, a line per change, the table again when all settle."""
    from contreact.cli.progress import note_line

    _snapshot(watch)
    sys.stdout.flush()
    shown = {v.run_id: v.status for v in watch.views.values()}
    while not _settled(watch):
        time.sleep(WATCH_S)
        lines = [cycle_line(done) for done in watch.poll()]
        lines += [f"  {n.run_id}: {note_line(n)}" for n in watch.notes]
        watch.notes.clear()
        for v in watch.views.values():
            if shown[v.run_id] != v.status:
                lines.append(f"  {v.run_id}: {shown[v.run_id]} → {v.status}")
                shown[v.run_id] = v.status
        for line in lines:
            out.print(cell(line), markup=False)
        sys.stdout.flush()
    out.print("", markup=False)
    _snapshot(watch)


@command(creates=True)
def batch(
    config: Annotated[
        Path | None,
        typer.Argument(help="Batch config: a run config with `models`, `replicates`."),
    ] = None,
    parallel: Annotated[
        int | None, typer.Option(help="Runs at once (default: the config's `parallel`).")
    ] = None,
    status: Annotated[
        str | None,
        typer.Option("--status", help="Show where batch NAME stands (it may run elsewhere)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="With --status: follow the batch until every run is completed, failed or "
            "paused (a table redrawn in place on a terminal, a line per change in a pipe).",
        ),
    ] = False,
    no_work: Annotated[
        bool,
        typer.Option(
            "--no-work",
            help="PostgreSQL: only put the study on the queue, for `contreact worker`s to take.",
        ),
    ] = False,
) -> None:
    """Run every model × replicate of CONFIG; run it again to resume the batch.

    With PostgreSQL storage the study goes on a job queue in that database, and this
    process works on it beside any `contreact worker` on other machines.
    """
    if status is not None:
        _status(status, as_json, follow)
        return
    if follow:
        raise BadInputError("--watch goes with --status NAME")
    if config is None:
        raise BadInputError("give a batch CONFIG to run, or --status NAME to look at one")
    from contreact.checkpoints.engines import engine_for
    from contreact.checkpoints.registry import record_plan
    from contreact.studies.batch import BatchRunner, load_batch, preflight
    from contreact.studies.changes import differences, stored_runs
    from contreact.studies.status import BatchWatch

    spec = load_batch(config)
    if parallel is not None and parallel < 1:
        raise BadInputError("--parallel must be at least 1")
    # The config's storage, as `run` reads it; every child is pointed at the same place.
    where = storage(spec.data_dir, spec.db_url)
    changed = differences(spec, stored_runs(engine_for(where), spec.name))
    if changed:
        raise BadInputError(
            f"batch {spec.name} has runs that {config} no longer describes: "
            + "; ".join(changed)
            + "; a batch takes more `cycles` or `replicates` only: to change the rest, give "
            "the config a new `batch:` name"
        )
    problems, warnings = preflight(spec, where)
    if problems:
        raise BadInputError(f"batch {spec.name} not started: " + "; ".join(problems))
    for line in warnings:
        err.print(f"contreact: warning: {line}", markup=False)
    # With --json, stdout is the summary document alone: progress goes to stderr.
    lines = err if as_json else out
    lines.print(
        f"batch {spec.name}: {len(spec.runs)} runs, {parallel or spec.parallel} at a time",
        markup=False,
    )
    planned = [(r.run_id, r.model, int(r.config.get("cycles", 0))) for r in spec.runs]
    record_plan(engine_for(where), spec.name, planned)
    queue = None
    if not where.is_sqlite:
        from contreact.errors import detail
        from contreact.studies.queue import prepare
        from contreact.studies.worker import Worker

        try:
            prepare(where)
        except Exception as exc:  # noqa: BLE001 - any failure stops the batch before it starts
            raise BadInputError(
                f"batch {spec.name} not started: the study queue in {where.shown} cannot be "
                f"made ready: {where.redact(detail(exc))}"
            ) from None
        queue = Worker(where)
        enqueued = queue.queue.enqueue(spec)
        lines.print(
            f"batch {spec.name}: {len(enqueued.queued)} queued, {len(enqueued.waiting)} "
            f"already queued or running, {len(enqueued.finished)} completed",
            markup=False,
        )
        if no_work:
            hint = (
                f"take its runs with `contreact worker` on any machine that reaches "
                f"{where.shown}; follow it with `contreact batch --status {spec.name}`"
            )
            lines.print(runnable(hint, where), markup=False)
            return
    elif no_work:
        raise BadInputError(
            "--no-work puts a study on the queue in a PostgreSQL database; with SQLite, "
            "`contreact batch CONFIG` drives it on this machine"
        )
    watch = BatchWatch(engine_for(where), planned)
    with Follower(watch, live=lines.is_terminal, lines=lines) as follower:

        def notify(run_id: str, what: str) -> None:
            follower.say(f"  {run_id}: {what}")

        runner = BatchRunner(spec, where, notify)
        if queue is None:
            results = runner.run(parallel or spec.parallel)
        else:
            queue.notify = notify
            queue.work(parallel=parallel or spec.parallel, studies=[spec])
            results = [runner.result_of(p, "queued", say=False) for p in spec.runs]
    if as_json:
        emit_json([asdict(r) for r in results])
    else:
        _summary(results)
    statuses = {r.status for r in results}
    if statuses - {"completed", "paused"}:
        raise typer.Exit(1)
    if "paused" in statuses:
        raise typer.Exit(3)


@command()
def worker(
    parallel: Annotated[int, typer.Option(help="Runs this worker drives at once.")] = 1,
    forever: Annotated[
        bool, typer.Option("--forever", help="Keep waiting for new studies when all are done.")
    ] = False,
) -> None:
    """Take queued runs of any study (PostgreSQL) until every run is finished."""
    if parallel < 1:
        raise BadInputError("--parallel must be at least 1")
    where = storage()
    if where.is_sqlite:
        raise BadInputError(
            "`contreact worker` takes runs from the study queue in a PostgreSQL database: "
            "give --storage postgresql+psycopg://... or set CONTREACT_DB_URL (with SQLite, "
            "`contreact batch CONFIG` drives a study on this machine)"
        )
    from contreact.checkpoints.fencing import worker_name
    from contreact.studies.queue import prepare_to_work
    from contreact.studies.worker import Worker

    prepare_to_work(where)

    def notify(run_id: str, what: str) -> None:
        out.print(f"  {run_id}: {what}", markup=False)

    out.print(f"worker {worker_name()}: taking queued runs, {parallel} at a time", markup=False)
    Worker(where, notify).work(parallel=parallel, forever=forever)
    out.print(f"worker {worker_name()}: every queued run is finished", markup=False)
