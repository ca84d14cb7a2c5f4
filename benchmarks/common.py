"""Shared machinery of the benchmark scripts: stub servers, storage, configs and figures.

Every benchmark drives the real engine through the real ``ChatOllama`` client over real
HTTP against the bundled stub server (``contreact.stub``), on a real database: a SQLite
file in a temporary directory, or, with ``--db-url``, a throwaway PostgreSQL database
created on that server and dropped afterwards. Nothing here is a test: the scripts print
figures, and ``run_all.py`` compares them with their targets.

Two ways to run the stub:

* :class:`StubProcess` - ``python -m contreact.stub`` in a child process, the way a real
  Ollama runs beside the engine. Timing benchmarks use it so that the stub's own CPU
  work does not compete for the measured interpreter's GIL.
* :class:`StampedStub` - the stub in this process, with an agent wrapper that stamps
  ``time.monotonic()`` on every chat request it answers (CLOCK_MONOTONIC is system-wide
  on Linux, so stamps compare with times taken in child processes). Latency and
  throughput benchmarks use the stamps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contreact.stub import ChatRequest, Reply, ScriptedAgent, StubServer

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
MODEL = "stub-model"

CONSTANT_CYCLE: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "write", "arguments": {"key": "note", "value": "same every cycle"}}]},
    {"tool_calls": [{"name": "read", "arguments": {"key": "note"}}]},
    {"content": "Reflection for cycle {cycle}."},
]
"""The constant-work cycle: overwrite one key, read it back, answer with a fixed-size note.

Three model calls and two tool calls per cycle, the same memory footprint in every cycle
(one key, overwritten), and a reflection whose length changes only with the digits of
the cycle number. Whatever grows from cycle to cycle is the framework's, not the agent's.
"""


def constant_work_scenario(cycles: int, *, latency_ms: float = 0.0) -> dict[str, Any]:
    """A scripted stub scenario that plays :data:`CONSTANT_CYCLE` in cycles 1..``cycles``.

    Args:
        cycles: The last cycle the script covers (later cycles get the scripted agent's
            plain default answer, which closes the cycle at once).
        latency_ms: Delay the stub adds to every chat request.

    Returns:
        A scenario mapping for :meth:`StubServer.from_scenario` or a scenario YAML file.
    """
    return {
        "agent": "scripted",
        "description": "benchmark: constant work per cycle (write, read, answer)",
        "latency_ms": latency_ms,
        "script": {c: CONSTANT_CYCLE for c in range(1, cycles + 1)},
    }


def constant_work_agent(cycles: int) -> ScriptedAgent:
    """The :data:`CONSTANT_CYCLE` agent for cycles 1..``cycles``, for an in-process stub."""
    return ScriptedAgent({c: CONSTANT_CYCLE for c in range(1, cycles + 1)})


STEADY_SLOTS = 8
"""How many memory slots the steady workload cycles through (``slot-0`` .. ``slot-7``)."""
STEADY_STEPS = 4
"""Model calls of a steady cycle: write, read, list, reflect."""

_STEADY_OPENINGS = (
    "In cycle {cycle} I stored a fresh note in {slot} and read it straight back.",
    "Cycle {cycle}: {slot} now holds my latest observation, and the read confirmed it.",
    "This time (cycle {cycle}) I rewrote {slot} and checked what the store returned.",
    "I used cycle {cycle} to refresh {slot}; the value came back unchanged.",
    "Working through my rotation, cycle {cycle} landed on {slot} again.",
    "During cycle {cycle} the slot I touched was {slot}, written then read.",
)
_STEADY_MIDDLES = (
    "Listing the keys showed all eight slots in place, so nothing has gone missing.",
    "The key list still has eight entries; the rotation keeps memory at a fixed size.",
    "I listed my memory afterwards and counted eight keys, as expected.",
    "Eight keys remain, one per slot, which tells me the overwrite worked.",
    "The list of keys is stable: the same eight names as the previous pass.",
    "Nothing new appeared among the keys; each slot is simply overwritten in turn.",
    "My memory index looks tidy, eight slots and no stray entries.",
)
_STEADY_CLOSINGS = (
    "Next I will move on to the following slot and compare the two notes.",
    "I want to see whether the older values in the other slots still make sense.",
    "Perhaps the next pass should record a short summary instead of raw facts.",
    "The routine is steady; I will keep it going and watch for drift.",
    "Later I might check how long ago each slot was last refreshed.",
)


def steady_cycle(cycle: int) -> list[dict[str, Any]]:
    """The steady workload's model replies for one cycle.

    Write ``slot-{cycle % 8}``, read it back, list the keys, then reflect. The
    reflection is three sentences drawn from rotating pools of different lengths (6, 7
    and 5 choices, so a combination recurs only every 210 cycles), naming the cycle and
    the slot: the similarity monitor sees varied, realistic text of a steady size.
    """
    slot = f"slot-{cycle % STEADY_SLOTS}"
    reflection = " ".join(
        (
            _STEADY_OPENINGS[cycle % len(_STEADY_OPENINGS)],
            _STEADY_MIDDLES[cycle % len(_STEADY_MIDDLES)],
            _STEADY_CLOSINGS[cycle % len(_STEADY_CLOSINGS)],
        )
    ).format(cycle=cycle, slot=slot)
    value = f"observation from cycle {cycle}, kept in {slot}"
    return [
        {"tool_calls": [{"name": "write", "arguments": {"key": slot, "value": value}}]},
        {"tool_calls": [{"name": "read", "arguments": {"key": slot}}]},
        {"tool_calls": [{"name": "list", "arguments": {}}]},
        {"content": reflection},
    ]


def steady_scenario(cycles: int, latency_ms: float = 0.0) -> dict[str, Any]:
    """A scripted stub scenario that plays :func:`steady_cycle` in cycles 1..``cycles``.

    The steady workload of a long run: the same work every cycle - one of 8
    memory slots written, read back, the keys listed, a reflection of steady length -
    so memory stays at 8 keys and whatever grows per cycle is the framework's.

    Args:
        cycles: The last cycle the script covers (later cycles get the scripted agent's
            plain default answer, which closes the cycle at once).
        latency_ms: Delay the stub adds to every chat request.

    Returns:
        A scenario mapping for :meth:`StubServer.from_scenario` or a scenario YAML file.
    """
    return {
        "agent": "scripted",
        "description": "benchmark: steady workload (write a slot, read it, list keys, reflect)",
        "latency_ms": latency_ms,
        "script": {c: steady_cycle(c) for c in range(1, cycles + 1)},
    }


_STEADY_STEP_AFTER = {None: 0, "write": 1, "read": 2, "list": 3}
"""The steady cycle's next step, by the cycle's last tool call (None: no call yet)."""


class SteadyAgent:
    """The steady workload for every cycle, as an in-process stub agent.

    It builds each cycle's replies on demand, so it covers any number of cycles without
    holding a script the size of the run.

    It knows its step from the cycle's last tool call, not from the number of its turns
    the prompt still shows (what `ScriptedAgent` counts): once the prompt window is full,
    contreact trims the cycle's older turns, and an agent that counted them would repeat
    its calls until the cycle's budget withdrew the tools (10 model calls a cycle instead
    of 4, from the cycle the window filled). The newest turn is never trimmed, so every
    cycle has the same four calls before and after the window fills.
    """

    def respond(self, req: ChatRequest) -> Reply:
        """Answer the next step of cycle ``req.cycle`` (see :func:`steady_cycle`)."""
        calls = req.cycle_tool_calls
        step = _STEADY_STEP_AFTER.get(calls[-1]["name"] if calls else None, req.step)
        entry = steady_cycle(req.cycle)[min(step, STEADY_STEPS - 1)]
        # ScriptedAgent answers entry number `req.step`: a script of that entry only.
        return ScriptedAgent({req.cycle: [entry] * (req.step + 1)}).respond(req)


def steady_agent() -> SteadyAgent:
    """The :func:`steady_cycle` agent for an in-process stub (any number of cycles)."""
    return SteadyAgent()


# ----------------------------------------------------------------------------- figures


@dataclass
class Figure:
    """One measured figure, with its target when it has one.

    Attributes:
        key: Short identifier (``a``, ``b1``, ...), the row label in ``run_all``.
        label: What was measured, in a few words.
        value: The measured value (None when it could not be measured).
        unit: Unit shown after the value (``x``, ``s``, ``MB``, ``%``, ...).
        target: Threshold the value is compared with (None: informational only).
        higher_is_better: True when the target is a minimum, False when a maximum.
        note: Method or context worth a few words in the summary.
    """

    key: str
    label: str
    value: float | None
    unit: str
    target: float | None = None
    higher_is_better: bool = False
    note: str = ""

    @property
    def verdict(self) -> str:
        """``pass``, ``MISS``, ``info`` (no target) or ``n/a`` (not measured)."""
        if self.value is None:
            return "n/a"
        if self.target is None:
            return "info"
        ok = self.value >= self.target if self.higher_is_better else self.value <= self.target
        return "pass" if ok else "MISS"

    @property
    def target_text(self) -> str:
        """The target as ``<= 1.5 x`` / ``>= 95 %``, or ``-``."""
        if self.target is None:
            return "-"
        return f"{'>=' if self.higher_is_better else '<='} {fmt(self.target)} {self.unit}".strip()

    @property
    def value_text(self) -> str:
        """The value with its unit."""
        return "-" if self.value is None else f"{fmt(self.value)} {self.unit}".strip()


def fmt(value: float) -> str:
    """A number with about three significant digits, no exponent for everyday sizes."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """Print a plain-text table with right-aligned numeric columns.

    Args:
        headers: Column titles.
        rows: Cells (anything ``str()`` can render; floats via :func:`fmt`).
        title: A line printed above the table.
    """
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r[i]) for r in cells) and bool(cells) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    if title:
        print(f"\n{title}")
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in cells:
        print(line(row))


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return fmt(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", "").split()[0])
    except (ValueError, IndexError):
        return False
    return True


def report(figures: Sequence[Figure], json_path: str | None) -> None:
    """Print the figures and, if asked, write them as JSON for ``run_all.py``.

    Args:
        figures: What the benchmark measured.
        json_path: File to write (``--json``), or None.
    """
    print_table(
        ["figure", "measured", "target", "verdict"],
        [[f"({f.key}) {f.label}", f.value_text, f.target_text, f.verdict] for f in figures],
        title="Figures",
    )
    if json_path:
        Path(json_path).write_text(json.dumps([asdict(f) for f in figures], indent=2))


def median(values: Sequence[float]) -> float:
    """The median (of a non-empty sequence)."""
    return float(statistics.median(values))


# ------------------------------------------------------------------------ command line


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark shares.

    Args:
        description: The script's one-line purpose.

    Returns:
        A parser with ``--quick``, ``--json`` and ``--db-url``.
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="short smoke version")
    p.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    p.add_argument(
        "--db-url",
        metavar="URL",
        help="PostgreSQL server URL (e.g. postgresql://postgres@127.0.0.1:5432/test); "
        "a throwaway database is created on it and dropped afterwards. Default: SQLite.",
    )
    return p


# ----------------------------------------------------------------------------- storage


@dataclass
class BenchStorage:
    """Where a benchmark keeps its runs.

    Attributes:
        data_dir: The data directory (SQLite file and JSONL logs).
        db_url: The PostgreSQL database URL, or None for SQLite.
    """

    data_dir: Path
    db_url: str | None = None

    @property
    def is_sqlite(self) -> bool:
        """True for the default SQLite file."""
        return self.db_url is None

    @property
    def sqlite_path(self) -> Path:
        """The SQLite database file."""
        return self.data_dir / "contreact.db"

    def storage(self) -> Any:
        """The engine's `Storage` for this place."""
        from contreact.checkpoints.storage import resolve_storage

        return resolve_storage(self.data_dir, self.db_url)

    def cli_args(self) -> list[str]:
        """Global `contreact` flags that select this storage."""
        args = ["--data-dir", str(self.data_dir)]
        if self.db_url:
            args += ["--db-url", self.db_url]
        return args

    def config_section(self) -> dict[str, Any]:
        """The `storage:` section of a run config."""
        section: dict[str, Any] = {"data_dir": str(self.data_dir)}
        if self.db_url:
            section["url"] = self.db_url
        return section


@contextmanager
def bench_storage(db_url: str | None, prefix: str = "contreact-bench-") -> Iterator[BenchStorage]:
    """A fresh temporary data directory, and a throwaway PostgreSQL database if asked.

    Args:
        db_url: A PostgreSQL server URL (any database on it; used to create and drop the
            throwaway one), or None for SQLite.
        prefix: Temporary directory name prefix.

    Yields:
        The storage; everything is removed on exit.
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        data_dir = Path(tmp) / "runs"
        if db_url is None:
            yield BenchStorage(data_dir)
            return
        import psycopg

        admin = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
        name = f"contreact_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        base = admin.rsplit("/", 1)[0].split("://", 1)[1]
        try:
            yield BenchStorage(data_dir, f"postgresql+psycopg://{base}/{name}")
        finally:
            from contreact.checkpoints.engines import dispose_engines

            dispose_engines()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_config(
    run_id: str, host: str, cycles: int, where: BenchStorage, **extra: Any
) -> dict[str, Any]:
    """A run configuration mapping (what a YAML config file holds).

    Args:
        run_id: The run id.
        host: The stub's URL.
        cycles: Number of cycles.
        where: The storage.
        **extra: Further top-level keys (e.g. ``limits``), merged over the defaults.

    Returns:
        The mapping, ready for `parse_config` or a YAML file.
    """
    config: dict[str, Any] = {
        "run_id": run_id,
        "model": MODEL,
        "cycles": cycles,
        "ollama": {"host": host, "timeout_s": 60, "retries": 2, "retry_budget_s": 20},
        "operator": {"mode": "auto"},
        "storage": where.config_section(),
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


def write_yaml(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as YAML to ``path`` and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False), encoding="utf-8")
    return path


def child_env() -> dict[str, str]:
    """The environment for `contreact` child processes: no inherited contreact settings."""
    drop = ("OLLAMA_HOST", "CONTREACT_HOME", "CONTREACT_DB_URL", "CONTREACT_FAILPOINTS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_at_once(commands: Sequence[Sequence[str]]) -> None:
    """Start every command at once and wait for all; raise naming those that failed."""
    procs = [
        subprocess.Popen(
            list(cmd),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for cmd in commands
    ]
    errors = []
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"rc {proc.returncode}")
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(procs)} runs failed: {errors}")


def contreact_cmd(where: BenchStorage, *args: str) -> list[str]:
    """The argv of ``python -m contreact`` with the storage flags and ``args``."""
    return [PYTHON, "-m", "contreact", *where.cli_args(), *args]


# --------------------------------------------------------------------------------- stub


class StubProcess:
    """``python -m contreact.stub`` in a child process, serving a scenario file."""

    def __init__(
        self,
        scenario: Mapping[str, Any],
        workdir: Path,
        *,
        latency_ms: float = 0.0,
        models: Sequence[str] = (MODEL,),
    ) -> None:
        """Write the scenario file; nothing runs until :meth:`start`.

        Args:
            scenario: A scenario mapping (see ``contreact.stub.agents.load_scenario``).
            workdir: Folder for the scenario file.
            latency_ms: Delay added to every chat request.
            models: Chat model names to serve.
        """
        self.scenario_path = write_yaml(workdir / f"scenario-{uuid.uuid4().hex[:6]}.yaml", scenario)
        self.latency_ms = latency_ms
        self.models = list(models)
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> StubProcess:
        """Start the process and wait for its ``STUB READY`` line."""
        cmd = [
            PYTHON,
            "-m",
            "contreact.stub",
            "--scenario",
            str(self.scenario_path),
            "--latency-ms",
            str(self.latency_ms),
            "--models",
            ",".join(self.models),
        ]
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env()
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("STUB READY "):
            self.stop()
            raise RuntimeError(f"stub process did not start: {line!r}")
        self.url = line.split()[-1]
        return self

    def stop(self) -> None:
        """Terminate the process (it exits 0 on SIGTERM)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> StubProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests(self) -> list[dict[str, Any]]:
        """The recorded ``/api/chat`` requests, oldest first."""
        url = f"{self.url}/_stub/requests?path=/api/chat"
        with urllib.request.urlopen(url, timeout=60) as resp:
            return list(json.loads(resp.read()))

    def reset(self) -> None:
        """Forget the recorded requests."""
        req = urllib.request.Request(f"{self.url}/_stub/reset", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=30):
            pass


@dataclass
class Stamp:
    """One chat request as the in-process stub saw it."""

    at: float
    """``time.monotonic()`` when the agent was asked (the request has arrived and parsed)."""
    model: str
    cycle: int
    step: int


@dataclass
class StampingAgent:
    """Wraps an agent: stamps every request, optionally calls a hook before answering.

    Attributes:
        inner: The agent that answers.
        hook: Called with each stamp before the answer is made (e.g. to kill a client).
        stamps: Every request seen, in arrival order.
    """

    inner: Any
    hook: Callable[[Stamp], None] | None = None
    stamps: list[Stamp] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, req: ChatRequest) -> Reply:
        """Stamp the request, run the hook, answer through the inner agent."""
        stamp = Stamp(time.monotonic(), req.model, req.cycle, req.step)
        with self._lock:
            self.stamps.append(stamp)
        if self.hook is not None:
            self.hook(stamp)
        reply: Reply = self.inner.respond(req)
        return reply

    def since(self, t0: float) -> list[Stamp]:
        """Stamps taken at or after monotonic time ``t0``."""
        with self._lock:
            return [s for s in self.stamps if s.at >= t0]


class StampedStub:
    """An in-process stub whose agent stamps every chat request with ``time.monotonic()``."""

    def __init__(
        self,
        inner: Any,
        *,
        latency_ms: float = 0.0,
        models: Sequence[str] = (MODEL,),
        hook: Callable[[Stamp], None] | None = None,
    ) -> None:
        """Create (and start) the server.

        Args:
            inner: The agent that answers.
            latency_ms: Delay added to every chat request.
            models: Chat model names to serve.
            hook: Called with each stamp before the answer (see :class:`StampingAgent`).
        """
        self.agent = StampingAgent(inner, hook)
        self.server = StubServer(self.agent, latency_ms=latency_ms, models=list(models)).start()
        self.url = self.server.url

    def __enter__(self) -> StampedStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def peak_rss_mb(rusage: Any) -> float:
    """``ru_maxrss`` of a rusage (KiB on Linux) in MB (10^6 bytes)."""
    return float(rusage.ru_maxrss) * 1024 / 1e6


def now() -> float:
    """``time.perf_counter()``, named for readability at call sites."""
    return time.perf_counter()
