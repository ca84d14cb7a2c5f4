"""(L) A long run: per-cycle driver time, bytes, RSS and command times at cycles 1 to 10,000.

What it measures: whether the 10,000th cycle of a run costs what the 10th did.
One run of the steady workload (``common.steady_cycle``: each cycle writes one of 8 memory
slots, reads it back, lists the keys and reflects in varied sentences; the model is the
stub at 0 ms latency, in a child process) is driven the way a user drives it, by
``contreact`` processes: ``run`` to cycle 1, then ``resume --cycles K`` to each mark
(100, 1,000, 5,000, 9,000 and 10,000 by default; ``--cycles N`` scales them). At each mark:

* **driver time per cycle**: the time between one cycle's CYCLE_END event and the next
  one's (microsecond timestamps in the event log), median over the 100 cycles that end at
  the mark; a segment's first cycle (which carries its process start) is left out.
  With a 0 ms model, a cycle's time is contreact's own: prompt assembly, the HTTP
  round trips, parsing, the journal, the checkpoints and the similarity monitor;
* **bytes**: the database (SQLite: the file, whose log every command empties on exit;
  PostgreSQL: ``pg_database_size``); bytes per cycle over a window are its growth
  divided by the cycles in it;
* **RSS**: the peak resident set of the process that drove the cycles up to the mark
  (``wait4``);
* **commands**, each a process from start to exit: ``resume --cycles 1`` on a copy of
  the database (a file copy; on PostgreSQL ``CREATE DATABASE ... TEMPLATE``), ``show``
  and ``report`` (lexical similarity, into a temporary folder), with their peak RSS.

The figures compare the end with the start: driver time of the last 10 % of cycles vs the
first 10 %, bytes per cycle of the last 1,000 vs the first 1,000, RSS at the last mark vs
1,000, and ``resume --cycles 1`` at the last mark vs at cycle 10 (a separate 10-cycle run).

The first tenth and the last are driven minutes apart (an hour on PostgreSQL), and on a
shared virtual machine every phase of a cycle, those that touch no storage too, ran 30 %
slower for stretches of a run and not in others. So two figures are also taken in turns,
where both sides see the same machine: (L1p) ``WINDOW`` cycles resumed from a copy of the
run at the end of its first tenth and from a copy at its end, ``PAIRED_ROUNDS`` rounds, the
order alternating; and the resumes at cycle 10 and at the end (L4, L4c), ``RESUME_REPEATS``
rounds likewise.

``--keep DIR`` keeps the data directory (SQLite) for a look at the report's plots.

The workload is the same shape in every cycle, before and after the prompt window fills.
Two things made the first 1,000 cycles store fewer bytes than the last 1,000 (1.15x at
``num_ctx`` 16384, where the window filled near cycle 225), both the workload's, not
contreact's storage: (1) once the window is full, contreact trims the cycle's older turns
from the prompt, and the stub's scripted agent, which finds its step by counting the
turns it is shown, repeated its calls until the cycle's budget withdrew the tools (10
model calls a cycle instead of 4); the steady agent now goes by the cycle's last tool
call (``common.SteadyAgent``), so every cycle makes 4 calls; (2) a full window adds a
CONTEXT_TRIM event to every model call (about 700 bytes of events a cycle). So the run uses
``num_ctx`` 4096 (``--num-ctx``), which fills within the first few dozen cycles: from
there every cycle stores the same. The cycle the window filled is printed with L1s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    MODEL,
    PYTHON,
    BenchStorage,
    Figure,
    bench_storage,
    child_env,
    contreact_cmd,
    print_table,
    report,
    run_config,
    steady_agent,
    write_yaml,
)

T = TypeVar("T")

MARKS = (1, 100, 1_000, 5_000, 9_000, 10_000)
NUM_CTX = 4096
"""The prompt window: full within the first few dozen cycles, so the workload is steady
from there (at 16384 it filled near cycle 225; `--num-ctx`)."""
WINDOW = 100
"""Cycles whose median driver time is shown at each mark."""
RESUME_REPEATS = 5
"""`resume --cycles 1` at cycle 10 and at the end: the median of this many, taken in turns
(one sample varied by half between marks)."""
PAIRED_ROUNDS = 4
"""Rounds of the paired driver-time figure (L1p): in each, `WINDOW` cycles resumed from
the end of the first tenth and `WINDOW` from the end of the run, in turns."""


# ------------------------------------------------------------------------------ the stub


def serve_stub() -> None:
    """Serve the steady workload for any number of cycles (this script, `--serve-stub`)."""
    from contreact.stub import StubServer
    from contreact.stub.foreground import serve_until_signal

    class Unrecorded(StubServer):
        # The stub keeps every request for tests to inspect: 40,000 prompts of a long
        # run would be gigabytes of the stub's memory, and nobody reads them here.
        def record(self, *args: Any, **kwargs: Any) -> None:
            pass

    raise SystemExit(serve_until_signal(Unrecorded(steady_agent(), models=[MODEL]).start()))


class SteadyStub:
    """This script's `--serve-stub` mode in a child process (no scenario file to hold)."""

    def __enter__(self) -> SteadyStub:
        self.proc = subprocess.Popen(
            [PYTHON, __file__, "--serve-stub"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_env(),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("STUB READY "):
            self.proc.kill()
            raise RuntimeError(f"stub did not start: {line!r}")
        self.url = line.split()[-1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# --------------------------------------------------------------------------- processes


@dataclass
class Timed:
    """One `contreact` process: wall time (start to exit), peak RSS and CPU time."""

    seconds: float
    rss_mb: float
    cpu_s: float = 0.0
    """User + system CPU seconds: what other load on the machine inflates least."""


def timed(cmd: list[str], env: dict[str, str] | None = None) -> Timed:
    """Run `cmd`, fail loudly if it fails, and return its wall time and peak RSS."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env or child_env()
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[3:])} exited {proc.returncode}: {stderr}")
    return Timed(seconds, usage.ru_maxrss * 1024 / 1e6, usage.ru_utime + usage.ru_stime)


# ---------------------------------------------------------------------------- storage


def database_bytes(where: BenchStorage) -> int:
    """What the database takes now (SQLite file + any log; pg_database_size)."""
    if where.is_sqlite:
        wal = Path(f"{where.sqlite_path}-wal")
        return where.sqlite_path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    import psycopg

    assert where.db_url is not None
    url = where.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def copy_of(where: BenchStorage, into: Path) -> BenchStorage:
    """A copy of the storage (no process may be connected to it now)."""
    if where.is_sqlite:
        shutil.copytree(where.data_dir, into / "runs")
        # The copy's pages are dirty in the page cache: written out now, or the timed
        # command's first checkpoint of SQLite's log would wait for the whole file (60 ms
        # at 135 MB), a cost of the copy, not of the run's length.
        os.sync()
        return BenchStorage(into / "runs")
    import psycopg

    assert where.db_url is not None
    base, name = where.db_url.rsplit("/", 1)
    copy = f"{name}_copy_{uuid.uuid4().hex[:6]}"
    admin = where.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
        # As with SQLite's copy: the copy's pages sit dirty in the server's buffers, and the
        # timed command's reads waited for them to be written out (more the larger the
        # copy). A CHECKPOINT writes them first (it needs a superuser or pg_checkpoint;
        # without, the figure keeps the cost).
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")
    # The first connection to a new database builds its cache of the system catalogs (and
    # keeps it in a file): made here, as the process that drove the run made it for the
    # original, not by the timed command.
    copy_url = f"{base}/{copy}".replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(copy_url) as conn:
        conn.execute("SELECT 1")
    shutil.copytree(where.data_dir, into / "runs")
    os.sync()  # the run's JSONL log (74 MB at 10,000 cycles): as for SQLite's file above
    return BenchStorage(into / "runs", f"{base}/{copy}")


def drop_copy(copy: BenchStorage, original: BenchStorage) -> None:
    """Drop a PostgreSQL copy made by `copy_of` (a SQLite copy goes with its folder)."""
    if copy.db_url is None or original.db_url is None:
        return
    import psycopg

    name = copy.db_url.rsplit("/", 1)[1]
    admin = original.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cycle_ends(where: BenchStorage, run_id: str) -> dict[int, float]:
    """Each finished cycle's CYCLE_END time (seconds since the epoch)."""
    from sqlalchemy import select

    from contreact.checkpoints.engines import dispose_engines, engine_for
    from contreact.checkpoints.schema import events

    engine = engine_for(where.storage())
    query = select(events.c.cycle, events.c.timestamp).where(
        events.c.run_id == run_id, events.c.event_type == "CYCLE_END"
    )
    with engine.connect() as conn:
        ends = {
            int(c): datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
            for c, t in conn.execute(query)
        }
    dispose_engines()  # no connection of ours may stay open (PostgreSQL's TEMPLATE copy)
    return ends


def window_filled(where: BenchStorage, run_id: str) -> int | None:
    """The first cycle whose prompt was trimmed to fit `num_ctx` (None: none was).

    From then on every model call's prompt is trimmed (a CONTEXT_TRIM event each), so
    the steady comparison (L1s) starts after it.
    """
    from sqlalchemy import func, select

    from contreact.checkpoints.engines import dispose_engines, engine_for
    from contreact.checkpoints.schema import events

    engine = engine_for(where.storage())
    query = select(func.min(events.c.cycle)).where(
        events.c.run_id == run_id, events.c.event_type == "CONTEXT_TRIM"
    )
    with engine.connect() as conn:
        first = conn.execute(query).scalar()
    dispose_engines()
    return None if first is None else int(first)


# ------------------------------------------------------------------------------- marks


@dataclass
class Mark:
    """What was measured when the run reached a cycle."""

    cycle: int
    bytes: int
    driver_rss_mb: float
    commands: dict[str, Timed] = field(default_factory=dict)


def median_timed(samples: list[Timed]) -> Timed:
    """The sample of median wall time."""
    return sorted(samples, key=lambda t: t.seconds)[len(samples) // 2]


@contextlib.contextmanager
def a_copy(where: BenchStorage, workdir: Path) -> Iterator[BenchStorage]:
    """A copy of the storage (`copy_of`) for the duration of the block, then dropped."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        copy = copy_of(where, Path(tmp))
        try:
            yield copy
        finally:
            drop_copy(copy, where)


def in_turns(sides: list[T], rounds: int) -> Iterator[T]:
    """Each side once a round, which goes first alternating: both see the same machine."""
    for round_ in range(rounds):
        yield from sides if round_ % 2 == 0 else sides[::-1]


def resumes(copy: BenchStorage, run_id: str, host: str) -> dict[str, Timed]:
    """`resume --cycles 1` in a fresh process (one more cycle)."""
    resume = contreact_cmd(copy, "resume", run_id, "--cycles", "1", "-q", "--host", host)
    return {"resume --cycles 1": timed(resume)}


def measure_commands(
    where: BenchStorage,
    run_id: str,
    workdir: Path,
    host: str,
) -> dict[str, Timed]:
    """`resume --cycles 1`, `show` and `report` of the run as it is now.

    The resume is made on a copy, in a fresh process (one more cycle). The figures'
    resumes at the end are `paired_resumes`.
    """
    with a_copy(where, workdir) as copy:
        out = resumes(copy, run_id, host)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        out["show"] = timed(contreact_cmd(where, "show", run_id))
        out["report"] = timed(
            contreact_cmd(where, "report", run_id, "--lexical", "--out", f"{tmp}/report")
        )
    return out


def marks_for(cycles: int) -> list[int]:
    """The marks up to `cycles` (scaled when it is not 10,000), always ending at `cycles`."""
    scale = cycles / MARKS[-1]
    chosen = {1, min(100, cycles)} | {max(1, round(m * scale)) for m in MARKS if m >= 1_000}
    return sorted(c for c in chosen | {cycles} if c <= cycles)


def driver_times(ends: dict[int, float], starts: set[int]) -> dict[int, float]:
    """Seconds per cycle (from the previous CYCLE_END), leaving out each segment's first."""
    return {c: ends[c] - ends[c - 1] for c in sorted(ends) if c - 1 in ends and c not in starts}


def median_over(times: dict[int, float], first: int, last: int) -> float:
    """Median seconds per cycle over cycles first..last (those measured)."""
    values = [t for c, t in times.items() if first <= c <= last]
    return statistics.median(values) if values else float("nan")


def ten_cycles(host: str, where: BenchStorage, workdir: Path, num_ctx: int) -> None:
    """A separate 10-cycle run, `ten`: the resume figures' baseline."""
    config = write_yaml(
        workdir / "ten.yaml",
        run_config("ten", host, 10, where, model_options={"num_ctx": num_ctx}),
    )
    timed(contreact_cmd(where, "run", str(config), "-q"))


def paired_resumes(
    ten: BenchStorage, end: BenchStorage, run_id: str, workdir: Path, host: str
) -> tuple[dict[str, Timed], dict[str, Timed]]:
    """`resume --cycles 1` at cycle 10 (run `ten`) and at the end, in turns.

    Taken one after the other, the two would differ by what the machine did in between
    (at the start of a run and an hour later, another process's load or none); in turns,
    `RESUME_REPEATS` rounds alternating which goes first, each median sees the same
    machine. Returns the medians at cycle 10 and at the end.
    """
    samples: dict[tuple[str, str], list[Timed]] = {}
    for label, where, run in in_turns([("ten", ten, "ten"), ("end", end, run_id)], RESUME_REPEATS):
        with a_copy(where, workdir) as copy:
            for name, took in resumes(copy, run, host).items():
                samples.setdefault((label, name), []).append(took)
    medians = {key: median_timed(found) for key, found in samples.items()}
    return (
        {name: t for (label, name), t in medians.items() if label == "ten"},
        {name: t for (label, name), t in medians.items() if label == "end"},
    )


@dataclass
class Paired:
    """Driver seconds per cycle of cycles resumed from two points of one run, in turns."""

    early_cycle: int
    late_cycle: int
    early: list[float]
    late: list[float]


def paired_cycles(
    early: BenchStorage, late: BenchStorage, marks: tuple[int, int], run_id: str, workdir: Path
) -> Paired:
    """`WINDOW` cycles resumed from `early` (the run at `marks[0]`) and from `late`, in turns.

    The L1 figure compares the first tenth of a run with its last, driven minutes apart
    (an hour on PostgreSQL): whatever else the machine did meanwhile is in it. Here the
    same number of cycles is driven from a copy of the run as it was at the end of its
    first tenth and from a copy as it is at the end, `PAIRED_ROUNDS` times in turns (which
    goes first alternating), so both medians see the same machine. Each resume's first
    cycle (its process start) is left out, as in L1.
    """
    found = Paired(marks[0], marks[1], [], [])
    sides = [(early, marks[0], found.early), (late, marks[1], found.late)]
    for where, start, into in in_turns(sides, PAIRED_ROUNDS):
        with a_copy(where, workdir) as copy:
            timed(contreact_cmd(copy, "resume", run_id, "--cycles", str(WINDOW), "-q"))
            times = driver_times(cycle_ends(copy, run_id), {start + 1})
            into.extend(t for c, t in times.items() if c > start)
    return found


def main() -> None:
    from common import parser

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=MARKS[-1], help="length of the run")
    p.add_argument("--keep", metavar="DIR", help="copy the data directory here at the end")
    p.add_argument("--num-ctx", type=int, default=NUM_CTX, help="the prompt window (tokens)")
    p.add_argument("--serve-stub", action="store_true", help=argparse_hidden())
    p.add_argument(
        "--resumes-of",
        metavar="DIR",
        help="only the resume figures, of the run `long` kept in DIR by --keep (with "
        "--db-url: its data directory, and the database of the URL holds the run)",
    )
    args = p.parse_args()
    if args.serve_stub:
        serve_stub()
    if args.resumes_of:
        resumes_of(Path(args.resumes_of), args.num_ctx, args.db_url)
        return
    cycles = 300 if args.quick else args.cycles
    marks = marks_for(cycles)
    workdir = Path(tempfile.mkdtemp(prefix="contreact-long-"))
    run_id = "long"
    rows: list[Mark] = []
    starts: set[int] = set()
    with contextlib.ExitStack() as stack:
        stub = stack.enter_context(SteadyStub())
        where = stack.enter_context(bench_storage(args.db_url))
        backend = "SQLite" if where.is_sqlite else "PostgreSQL"
        print(
            f"{cycles:,} steady cycles on {backend}, num_ctx {args.num_ctx}, marks {marks}",
            flush=True,
        )
        ten_where = stack.enter_context(bench_storage(args.db_url, prefix="contreact-long10-"))
        ten_cycles(stub.url, ten_where, workdir, args.num_ctx)
        first_tenth = min(marks, key=lambda c: abs(c - cycles // 10))
        early: BenchStorage | None = None
        config = write_yaml(
            workdir / "long.yaml",
            run_config(run_id, stub.url, marks[0], where, model_options={"num_ctx": args.num_ctx}),
        )
        done = 0
        began = time.perf_counter()
        for mark in marks:
            starts.add(done + 1)
            if done == 0:
                driver = timed(contreact_cmd(where, "run", str(config), "-q"))
            else:
                driver = timed(
                    contreact_cmd(where, "resume", run_id, "--cycles", str(mark - done), "-q")
                )
            done = mark
            row = Mark(mark, database_bytes(where), driver.rss_mb)
            row.commands = measure_commands(where, run_id, workdir, stub.url)
            if mark == first_tenth:
                early = copy_of(where, workdir / "early")
                stack.callback(drop_copy, early, where)
            rows.append(row)
            times = driver_times(cycle_ends(where, run_id), starts)
            print(
                f"  cycle {mark:>6,}: {median_over(times, mark - WINDOW + 1, mark) * 1e3:.1f} "
                f"ms/cycle, {row.bytes / 1e6:.1f} MB, driver RSS {row.driver_rss_mb:.0f} MB, "
                + ", ".join(f"{k} {v.seconds:.2f} s" for k, v in row.commands.items())
                + f" ({time.perf_counter() - began:.0f} s so far)",
                flush=True,
            )
        if args.keep and where.is_sqlite:
            shutil.copytree(where.data_dir, Path(args.keep), dirs_exist_ok=True)
        times = driver_times(cycle_ends(where, run_id), starts)
        filled = window_filled(where, run_id)
        print("in turns: cycles from the first tenth and from the end; resumes at 10 and the end")
        assert early is not None
        paired = paired_cycles(early, where, (first_tenth, cycles), run_id, workdir)
        ten, end = paired_resumes(ten_where, where, run_id, workdir, stub.url)
        rows[-1].commands.update(end)
    shutil.rmtree(workdir, ignore_errors=True)
    show_results(rows, times, ten, cycles, args.json, filled, paired)


def resumes_of(kept: Path, num_ctx: int, db_url: str | None) -> None:
    """L4 and L4c alone, for a run kept by `--keep` (its cycles and figures are not redone).

    With `db_url`, the run `long` is in that PostgreSQL database (`kept` its data directory),
    and the 10-cycle run goes in a throwaway database on the same server.
    """
    workdir = Path(tempfile.mkdtemp(prefix="contreact-long-"))
    where = BenchStorage(kept, db_url)
    with SteadyStub() as stub, bench_storage(db_url) as ten_where:
        ten_cycles(stub.url, ten_where, workdir, num_ctx)
        tens, ends = paired_resumes(ten_where, where, "long", workdir, stub.url)
    shutil.rmtree(workdir, ignore_errors=True)
    for name, ten in tens.items():
        at_end = ends[name]
        print(
            f"{name}: at cycle 10 {ten.seconds:.2f} s ({ten.cpu_s:.2f} CPU-s), at the end "
            f"{at_end.seconds:.2f} s ({at_end.cpu_s:.2f} CPU-s): "
            f"{at_end.seconds / ten.seconds:.2f}x"
        )


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def show_results(
    rows: list[Mark],
    times: dict[int, float],
    tens: dict[str, Timed],
    cycles: int,
    json_path: str | None,
    filled: int | None = None,
    paired: Paired | None = None,
) -> None:
    """The table per mark and the figures."""
    by_cycle = {r.cycle: r for r in rows}
    tenth = max(1, cycles // 10)
    # Every tenth of the run, so a trend can be told from a slow stretch (another process
    # on the machine, a database checkpoint).
    medians = [
        f"{median_over(times, max(2, k * tenth + 1), (k + 1) * tenth) * 1e3:.1f}" for k in range(10)
    ]
    print(f"driver ms/cycle, median of each tenth of the run: {', '.join(medians)}")
    table = []
    for i, r in enumerate(rows):
        previous = rows[i - 1] if i else None
        per_cycle = (
            (r.bytes - previous.bytes) / (r.cycle - previous.cycle) if previous else float("nan")
        )
        table.append(
            [
                f"{r.cycle:,}",
                median_over(times, max(2, r.cycle - WINDOW + 1), r.cycle) * 1e3,
                r.bytes / 1e6,
                per_cycle,
                r.driver_rss_mb,
                r.commands["resume --cycles 1"].seconds,
                *[r.commands[k].seconds for k in ("show", "report")],
                r.commands["resume --cycles 1"].rss_mb,
                r.commands["resume --cycles 1"].cpu_s,
            ]
        )
    print_table(
        [
            "cycle",
            f"ms/cycle (median of {WINDOW})",
            "DB MB",
            "B/cycle since last mark",
            "driver RSS MB",
            "resume s",
            "show s",
            "report s",
            "resume RSS MB",
            "resume CPU s",
        ],
        table,
        title="(L) at each mark",
    )
    first_t, last_t = median_over(times, 2, tenth), median_over(times, cycles - tenth + 1, cycles)
    thousand = min(1_000, cycles // 2)
    first_mark = min(by_cycle, key=lambda c: abs(c - thousand))
    late_mark = min(by_cycle, key=lambda c: abs(c - (cycles - thousand)))
    first_b = (by_cycle[first_mark].bytes - by_cycle[1].bytes) / (first_mark - 1)
    last_b = (by_cycle[cycles].bytes - by_cycle[late_mark].bytes) / max(1, cycles - late_mark)
    end = by_cycle[cycles]
    ten = tens["resume --cycles 1"]
    figures = [
        Figure(
            "L1",
            f"driver time/cycle, last 10 % vs first 10 % ({cycles:,} cycles)",
            last_t / first_t,
            "x",
            1.1,
            note=f"{first_t * 1e3:.1f} -> {last_t * 1e3:.1f} ms (medians)",
        ),
    ]
    if filled is not None and filled + 10 + tenth < cycles - tenth:
        start = filled + 10
        steady = median_over(times, start, start + tenth - 1)
        figures.append(
            Figure(
                "L1s",
                f"driver time/cycle, last 10 % vs cycles {start:,}-{start + tenth - 1:,} "
                f"(the prompt full from cycle {filled:,})",
                last_t / steady,
                "x",
                1.1,
                note=f"{steady * 1e3:.1f} -> {last_t * 1e3:.1f} ms (medians)",
            )
        )
    if paired is not None:
        early, late = statistics.median(paired.early), statistics.median(paired.late)
        figures.append(
            Figure(
                "L1p",
                f"driver time/cycle resumed from cycle {paired.late_cycle:,} vs from "
                f"{paired.early_cycle:,}, in turns ({PAIRED_ROUNDS} x {WINDOW} cycles each)",
                late / early,
                "x",
                1.1,
                note=f"{early * 1e3:.1f} -> {late * 1e3:.1f} ms (medians)",
            )
        )
    figures += [
        Figure(
            "L2",
            f"bytes/cycle, cycles {late_mark + 1:,}-{cycles:,} vs 2-{first_mark:,}",
            last_b / first_b,
            "x",
            1.1,
            note=f"{first_b:,.0f} -> {last_b:,.0f} B/cycle",
        ),
        Figure(
            "L3",
            f"driver RSS at cycle {cycles:,} vs {first_mark:,}",
            end.driver_rss_mb / by_cycle[first_mark].driver_rss_mb,
            "x",
            1.1,
            note=f"{by_cycle[first_mark].driver_rss_mb:.0f} -> {end.driver_rss_mb:.0f} MB",
        ),
        Figure(
            "L4",
            f"resume --cycles 1 at cycle {cycles:,} vs at 10",
            end.commands["resume --cycles 1"].seconds / ten.seconds,
            "x",
            1.2,
            note=f"{ten.seconds:.2f} -> {end.commands['resume --cycles 1'].seconds:.2f} s",
        ),
        Figure(
            "L4c",
            f"resume --cycles 1 CPU seconds at cycle {cycles:,} vs at 10",
            end.commands["resume --cycles 1"].cpu_s / ten.cpu_s,
            "x",
            1.2,
            note=f"{ten.cpu_s:.2f} -> {end.commands['resume --cycles 1'].cpu_s:.2f} CPU-s",
        ),
        Figure("L5", f"report at cycle {cycles:,}", end.commands["report"].seconds, "s"),
        Figure("L6", f"show at cycle {cycles:,}", end.commands["show"].seconds, "s"),
    ]
    report(figures, json_path)


if __name__ == "__main__":
    if "--serve-stub" in sys.argv:
        serve_stub()
    main()
