"""Batches: several models × replicate runs of one config, with bounded concurrency.

Each run of a batch is an ordinary run (its own id, `<batch>.<model>.r<N>`) driven by its
own `contreact` child process, so one run's crash cannot take the others down and two
cores are used. Children die with the batch process (a killed batch leaves no orphans);
running the same batch again skips completed runs, resumes the rest and starts what
never started: the batch is resumable as a whole. With several Ollama hosts, runs are
spread over them round-robin and each stays pinned to its host (its prompt cache lives
there); a run whose host goes down fails with a clear reason and is resumed on another
host that answers.

Replicates differ by seed: replicate N of every model runs with `seed + N - 1`, where
`seed` is the config's `model_options.seed` (so replicate 1 keeps the configured seed and
the same replicate of two models shares one seed); with `seed: null` every replicate runs
unseeded. A model may be a mapping, `{name, model_options, reasoning, num_ctx}`, whose
settings apply to that model's runs only.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from pydantic import ValidationError

from contreact.checkpoints.cycles import cycle_records
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_schema import Error
from contreact.checkpoints.event_store import read_events
from contreact.checkpoints.private_files import open_private, private_dir
from contreact.checkpoints.registry import RunNotFoundError, get_run
from contreact.checkpoints.run_record import RunRecord
from contreact.checkpoints.storage import Storage
from contreact.config import BATCH_KEYS, BatchConfig, ConfigError, describe_error, parse_config
from contreact.config.files import deep_merge, with_import_dirs
from contreact.config.sections import DEFAULT_MODEL_OPTIONS
from contreact.config.yaml_file import YamlError, read_yaml
from contreact.engine.child import PARENT_ENV, RunRequest
from contreact.ollama.credentials import for_children, ollama_auth
from contreact.studies.fork_server import RunProcess

HOST_FAILURES = frozenset({"connection", "timeout"})


@dataclass(frozen=True)
class PlannedRun:
    """One run of a batch."""

    run_id: str
    model: str
    replicate: int
    config: dict[str, Any]
    seed: int | None = None
    """The replicate's seed (None: unseeded)."""

    @property
    def cycles(self) -> int:
        """The cycles the run is to reach: the batch config's `cycles`."""
        return int(self.config.get("cycles", 0))


def short_of(record: RunRecord, cycles: int) -> bool:
    """Whether a stored run is planned for fewer than `cycles` (the batch's were raised)."""
    return int(record.config.get("cycles", 0)) < cycles


@dataclass(frozen=True)
class BatchSpec:
    """A validated batch: its name, runs, hosts and default concurrency."""

    name: str
    runs: list[PlannedRun]
    hosts: list[str]
    parallel: int
    data_dir: str | None = None
    """The config's `storage.data_dir` (None: the default)."""
    db_url: str | None = None
    """The config's `storage.url` (None: the default SQLite file)."""


@dataclass(frozen=True)
class BatchResult:
    """How one run of the batch stands after this invocation."""

    run_id: str
    model: str
    host: str
    status: str
    action: str
    """What this invocation did: started, resumed, skipped (already completed), ..."""
    cycles: int
    memory_ops: int
    operator_messages: int
    final_memory_keys: int
    reason: str = ""


def _slug(model: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "-" for c in model)


def load_batch(path: Path) -> BatchSpec:
    """Read a batch config: a run config with `models`, `replicates`, `batch`, `parallel`.

    Raises:
        ConfigError: naming the file and every bad field.
    """
    try:
        data = read_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read batch config {path}: {exc.strerror or exc}") from None
    except YamlError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the batch config must be a YAML mapping")
    data = with_import_dirs(data, path)
    named = [key for key in ("run_id", "model") if key in data]
    problems = [f"`{key}` is set by the batch; use `batch` and `models` instead" for key in named]
    try:
        spec = BatchConfig.model_validate({k: v for k, v in data.items() if k not in named})
    except ValidationError as exc:
        problems += [describe_error(BatchConfig, e) for e in exc.errors()]
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    name = spec.batch or path.stem
    shared = {k: v for k, v in data.items() if k not in BATCH_KEYS}
    hosts = spec.hosts
    runs = []
    pairs = itertools.product(spec.models, range(1, spec.replicates + 1))
    for index, (entry, replicate) in enumerate(pairs):
        run_id = f"{name}.{_slug(entry.name)}.r{replicate}"
        changes: dict[str, Any] = {"run_id": run_id, "model": entry.name, "batch": name}
        if hosts:
            changes["ollama"] = {"host": hosts[index % len(hosts)]}
        merged = deep_merge(deep_merge(shared, entry.changes()), changes)
        options = merged.get("model_options")
        default = DEFAULT_MODEL_OPTIONS["seed"]
        base = options.get("seed", default) if isinstance(options, dict) else default
        seed = replicate_seed(base, replicate)
        merged = deep_merge(merged, {"model_options": {"seed": seed}})
        config = parse_config(merged, f"{path} ({run_id})")
        runs.append(PlannedRun(run_id, entry.name, replicate, config.model_dump(mode="json"), seed))
    stored: dict[str, Any] = (runs[0].config.get("storage") or {}) if runs else {}
    return BatchSpec(name, runs, hosts, spec.parallel, stored.get("data_dir"), stored.get("url"))


def preflight(spec: BatchSpec, storage: Storage) -> tuple[list[str], list[str]]:
    """What stops the batch before any run starts, and what only warns: lines of each.

    Every model is asked of every host a run may land on (a run moves when its host goes
    down), with the storage, as `contreact doctor BATCH.yaml` does. A host that answers but
    lacks a model stops the batch (its runs would fail there); a host that does not answer
    only warns while another answers, since its runs move; no host answering stops it.
    """
    from contreact.engine.doctor import batch_checks

    runs = [parse_config(r.config, r.run_id) for r in spec.runs]
    checks = list(batch_checks(runs, spec.hosts, storage))
    hosts = [c for c in checks if c.name == "ollama"]
    down = [c.detail for c in hosts if not c.ok]
    problems = [c.detail for c in checks if not c.ok and c.name != "ollama"]
    if len(down) == len(hosts):
        return down + problems, []
    return problems, [f"{line}: its runs go to the other hosts" for line in down]


def replicate_seed(base: Any, replicate: int) -> int | None:
    """Replicate N's seed: `base + N - 1` (None when the batch is unseeded).

    A non-integer `base` is returned as is, for the run config's validation to reject.
    """
    if base is None:
        return None
    if isinstance(base, bool) or not isinstance(base, int):
        return base
    return base + replicate - 1


def describe(result: BatchResult) -> str:
    """How a run ended, in a few words: `completed (3 cycles)`, `failed (1 cycles): why`."""
    why = f": {result.reason}" if result.status == "failed" and result.reason else ""
    return f"{result.status} ({result.cycles} cycles){why}"


def host_answers(host: str, timeout: float = 3.0) -> bool:
    """Whether an Ollama server answers at `host`."""
    try:
        url = f"{host.rstrip('/')}/api/version"
        return httpx.get(url, timeout=timeout, auth=ollama_auth()).status_code == 200
    except httpx.HTTPError:
        return False


Notify = Callable[[str, str], None]


class BatchRunner:
    """Drives a batch's runs as child processes, at most `parallel` at a time."""

    def __init__(self, spec: BatchSpec, storage: Storage, notify: Notify) -> None:
        self.spec = spec
        self.storage = storage
        self.notify = notify
        self.folder = storage.data_dir / "batches" / spec.name
        self._lock = threading.Lock()
        self.children: set[RunProcess] = set()
        """The run processes being waited on (a worker stops them when it is stopped)."""

    def run(self, parallel: int) -> list[BatchResult]:
        """Bring every run of the batch as far as it goes; results in batch order."""
        private_dir(self.folder)
        # Children started together would race to create the checkpoint tables of a fresh
        # database (PostgreSQL fails all but one on a duplicate type): create them first.
        from contreact.checkpoints.saver import open_saver

        with open_saver(self.storage):
            pass
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            return list(pool.map(self._one, self.spec.runs))

    def _one(self, planned: PlannedRun) -> BatchResult:
        return self.drive(planned)

    def drive(
        self,
        planned: PlannedRun,
        host: str | None = None,
        env: dict[str, str] | None = None,
        say: bool = True,
    ) -> BatchResult:
        """Bring one run as far as it goes in a child process: start, resume or skip it.

        Args:
            planned: The run.
            host: The Ollama host to drive it on (None: the one the batch planned, or the
                run's own once it exists).
            env: More environment for the child (a queued run's lease, `checkpoints.fencing`).
            say: Tell `notify` how the run ended.
        """
        engine = engine_for(self.storage)
        try:
            record = get_run(engine, planned.run_id)
        except RunNotFoundError:
            record = None
        target = planned.cycles
        if record is not None and record.status == "completed" and not short_of(record, target):
            return self.result_of(planned, "skipped (completed)")
        if record is not None and record.status == "running" and record.driven:
            return self.result_of(planned, f"skipped (driven by process {record.pid})")
        if record is None:
            config = planned.config
            if host is not None:
                config = deep_merge(config, {"ollama": {"host": host}})
            config_file = self.folder / f"{planned.run_id}.yaml"
            with open_private(config_file, "w") as fh:
                fh.write(yaml.safe_dump(config, sort_keys=False))
            action = "started"
            request = RunRequest(planned.run_id, self.storage, config_file=config_file)
        else:
            action = f"extended to {target} cycles" if short_of(record, target) else "resumed"
            moved = host if host is not None and host != record.host else None
            request = RunRequest(planned.run_id, self.storage, host=moved, cycles=target)
        self.notify(planned.run_id, action + (f" on {host}" if host else ""))
        code = self._child(request, env)
        try:
            tried = {get_run(engine, planned.run_id).host}
        except RunNotFoundError:
            return self.result_of(planned, action, say)
        while code == 1 and self._host_failed(planned.run_id):
            host = next((h for h in self.spec.hosts if h not in tried and host_answers(h)), None)
            if host is None:
                break
            tried.add(host)
            self.notify(planned.run_id, f"host down; resuming on {host}")
            action += f", moved to {host}"
            again = RunRequest(planned.run_id, self.storage, host=host, cycles=target)
            code = self._child(again, env)
        return self.result_of(planned, action, say)

    def _child(self, request: RunRequest, extra: dict[str, str] | None = None) -> int:
        log = self.folder / f"{request.run_id}.out"
        env = {**os.environ, **for_children(), PARENT_ENV: str(os.getpid()), **(extra or {})}
        with open_private(log, "a"):
            pass  # made private before the run process appends to it
        proc = RunProcess(request, env, log)
        self.children.add(proc)
        try:
            return proc.wait()
        finally:
            self.children.discard(proc)

    def stop_children(self) -> None:
        """Ask every run process to stop (SIGTERM: each records its run interrupted)."""
        for proc in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()

    def _host_failed(self, run_id: str) -> bool:
        errors = [
            e
            for e in read_events(engine_for(self.storage), run_id)
            if e["event_type"] == Error.event_type
        ]
        return bool(errors) and Error.read(errors[-1]["payload"]).kind in HOST_FAILURES

    def result_of(self, planned: PlannedRun, action: str, say: bool = True) -> BatchResult:
        """How `planned` stands now, as the registry says (`action`: what was done to it).

        `say`: tell `notify` too.
        """
        engine = engine_for(self.storage)
        try:
            record = get_run(engine, planned.run_id)
        except RunNotFoundError:
            log = self.folder / f"{planned.run_id}.out"
            lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
            reason = lines[-1] if lines else "the run never started"
            self.notify(planned.run_id, f"not started: {reason}")
            return BatchResult(
                planned.run_id, planned.model, "", "not started", action, 0, 0, 0, 0, reason
            )
        records = cycle_records(engine, planned.run_id)
        result = BatchResult(
            run_id=planned.run_id,
            model=planned.model,
            host=record.host,
            status=record.shown_status,
            action=action,
            cycles=len(records),
            memory_ops=sum(int(r.metrics.get("memory_ops_total", 0)) for r in records),
            operator_messages=sum(int(r.metrics.get("messages_to_operator", 0)) for r in records),
            final_memory_keys=int(records[-1].metrics.get("final_memory_keys", 0))
            if records
            else 0,
            reason=record.reason,
        )
        if say:
            self.notify(planned.run_id, describe(result))
        return result
