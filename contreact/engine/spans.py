"""The spans of a traced drive, in OpenInference's conventions, and how they leave the process.

One trace per drive of a run: an AGENT span for the drive (its `session.id` is the run
id, so a collector groups a run's drives), a CHAIN span per cycle, an LLM span per model
call and a TOOL span per tool call, nested in that order.

Model calls are OpenInference's own LangChain tracer at work (model, messages, token
counts, duration), handed to LangChain for this drive only (a configure hook, in this
drive's context) and kept to the chat model's runs: LangGraph's node runs would be
traced again whenever a step is replayed. A replayed model answer makes no call, so it
makes no span. Cycles and tool calls come from the events each commit adds
(`checkpoints.event_mirror.committed_watch`): an effect replayed from the journal after a
resume commits nothing new, so nothing is traced twice.

Spans leave on a background thread (a batch processor); the run never waits for them.
A collector that fails is not asked again for a while, and its spans are dropped, with
one warning per run. At exit the process waits a bounded time for what is queued, and
not at all while the collector is known to be down.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from multiprocessing.util import Finalize
from typing import Any

from langchain_core.tracers.context import register_configure_hook
from langchain_core.tracers.schemas import Run
from openinference.instrumentation import OITracer, TraceConfig

# The tracer the instrumentor installs; its module is private, its class the one to use.
from openinference.instrumentation.langchain._tracer import OpenInferenceTracer
from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry import context as context_api
from opentelemetry import trace as trace_api
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span, Status, StatusCode
from sqlalchemy import func, select

from contreact.checkpoints import keys
from contreact.checkpoints.engines import engine_for
from contreact.checkpoints.event_mirror import committed_watch
from contreact.checkpoints.event_store import payload_of
from contreact.checkpoints.registry import RunRecord, get_run
from contreact.checkpoints.schema import events
from contreact.checkpoints.storage import Storage
from contreact.errors import detail
from contreact.version import __version__

log = logging.getLogger("contreact.tracing")

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
SESSION = SpanAttributes.SESSION_ID

EXPORT_TIMEOUT_S = 3.0
"""Seconds one export may take, retries included, unless OTEL_EXPORTER_OTLP_TIMEOUT says."""
QUIET_S = 30.0
"""After an export fails, spans are dropped without asking the collector for this long."""
SCHEDULE_MS = 500
"""How often queued spans are sent, unless OTEL_BSP_SCHEDULE_DELAY says: a run is watched live."""
EXIT_WAIT_MS = 2000
"""The most a process waits at exit for its queued spans to be sent."""

_EVENT_TYPE = re.compile(r'"event_type": "([A-Z_]+)"')
_TRACED_EVENTS = frozenset({"CYCLE_START", "TOOL_CALL", "CYCLE_END"})


class _Exporter(SpanExporter):
    """The OTLP exporter, guarded: a failing collector is left alone for a while.

    The SDK's exporter retries a refused connection until its timeout; behind a batch
    processor that costs the run nothing, but a process at exit would wait for it. So
    after one failure the spans of the next `QUIET_S` seconds are dropped at once. Each
    run whose spans are dropped is named once, in one warning.
    """

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self.inner, self.where = inner, where
        self.quiet_until = 0.0
        self.reason = "it did not answer"
        self.warned: set[str] = set()
        self.ended: Counter[str] = Counter()
        """Spans each run ended (`_Tally`)."""
        self.delivered: Counter[str] = Counter()
        """Spans of each run the collector took."""
        self.lock = threading.Lock()

    @property
    def down(self) -> bool:
        """Whether the collector failed within the last `QUIET_S` seconds."""
        return time.monotonic() < self.quiet_until

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send `spans`, or drop them while the collector is down."""
        runs = [str(s.attributes.get(SESSION)) for s in spans if s.attributes]
        if not self.down:
            try:
                if self.inner.export(spans) is SpanExportResult.SUCCESS:
                    with self.lock:
                        self.delivered.update(runs)
                    return SpanExportResult.SUCCESS
            except Exception as exc:  # noqa: BLE001 - an exporter's failure drops spans
                self.reason = detail(exc)
            self.quiet_until = time.monotonic() + QUIET_S
        self._warn(set(runs))
        return SpanExportResult.FAILURE

    def undelivered(self) -> None:
        """Warn of each run some of whose spans the collector has not taken (at exit)."""
        with self.lock:
            short = {run for run, n in self.ended.items() if n > self.delivered[run]}
        self._warn(short)

    def _warn(self, runs: set[str]) -> None:
        with self.lock:
            new = sorted(runs - self.warned)
            self.warned.update(new)
        for run in new:
            log.warning(
                "contreact: traces of run %s cannot reach %s (%s); its spans are dropped, "
                "the run goes on",
                run,
                self.where,
                self.reason,
            )

    def shutdown(self) -> None:
        """Stop the exporter (an export retrying stops too)."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is held here."""
        return True


class _Tally(SpanProcessor):
    """Counts the spans each run ends, so the exit can tell which were never delivered."""

    def __init__(self, exporter: _Exporter) -> None:
        self.exporter = exporter

    def on_end(self, span: ReadableSpan) -> None:
        run = span.attributes.get(SESSION) if span.attributes else None
        if run is not None:
            with self.exporter.lock:
                self.exporter.ended[str(run)] += 1


class _Reasons(logging.Filter):
    """Keeps what the SDK's exporter says of a failure for the one warning, and hides it."""

    def __init__(self, exporter: _Exporter) -> None:
        super().__init__()
        self.exporter = exporter

    def filter(self, record: logging.LogRecord) -> bool:
        self.exporter.reason = record.getMessage().splitlines()[0][:200]
        return False


@dataclass
class _Setup:
    """The process's tracer provider, exporter and LangChain hook, made at the first drive."""

    provider: TracerProvider
    processor: BatchSpanProcessor
    exporter: _Exporter
    tracer: trace_api.Tracer
    model_tracer: OITracer
    hook: ContextVar[OpenInferenceTracer | None]
    exited: bool = False

    def at_exit(self) -> None:
        """Send what is queued, within `EXIT_WAIT_MS`; nothing while the collector is down.

        The processor's own flush and shutdown wait as long as an export retries, so the
        flush runs on a thread of its own that the exit waits for a bounded time.
        """
        if self.exited:
            return
        self.exited = True
        if not self.exporter.down:
            flush = threading.Thread(
                target=self.processor.force_flush, name="trace-flush", daemon=True
            )
            flush.start()
            flush.join(EXIT_WAIT_MS / 1000)
        self.exporter.undelivered()


_setup: _Setup | None = None
_setup_lock = threading.Lock()


def _exporter(protocol: str) -> SpanExporter:
    told = _set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    timeout = None if told else EXPORT_TIMEOUT_S
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(timeout=timeout)


def _set(*names: str) -> bool:
    return any(os.environ.get(name, "").strip() for name in names)


def _set_up(protocol: str, where: str) -> _Setup:
    """The process's tracing, made once (the first traced drive's protocol and endpoint)."""
    global _setup
    with _setup_lock:
        if _setup is not None:
            return _setup
        defaults = {"service.name": "contreact", "openinference.project.name": "contreact"}
        resource = Resource.create(defaults).merge(OTELResourceDetector().detect())
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        inner = _exporter(protocol)
        exporter = _Exporter(inner, where)
        reasons = _Reasons(exporter)
        for name in {type(inner).__module__, "opentelemetry.exporter.otlp.proto.grpc.exporter"}:
            logging.getLogger(name).addFilter(reasons)
        delay = None if _set("OTEL_BSP_SCHEDULE_DELAY") else SCHEDULE_MS
        processor = BatchSpanProcessor(exporter, schedule_delay_millis=delay)
        provider.add_span_processor(_Tally(exporter))
        provider.add_span_processor(processor)
        hook: ContextVar[OpenInferenceTracer | None] = ContextVar(
            "contreact_model_tracer", default=None
        )
        register_configure_hook(hook, inheritable=True)
        _setup = _Setup(
            provider,
            processor,
            exporter,
            provider.get_tracer("contreact", __version__),
            OITracer(provider.get_tracer("contreact.models", __version__), config=TraceConfig()),
            hook,
        )
        atexit.register(_setup.at_exit)
        # A process multiprocessing started (a batch's run) ends without atexit: it runs
        # its own finalizers instead.
        Finalize(None, _setup.at_exit, exitpriority=100)
        return _setup


@dataclass
class _Drive:
    """The spans of one drive of a run: its own, its open cycle's, and the cycle's calls."""

    run_id: str
    tracer: trace_api.Tracer
    run: Span
    cycle: tuple[int, Span] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def parent(self) -> Span:
        """The span a model or tool call nests in: its cycle's, else the drive's."""
        return self.cycle[1] if self.cycle is not None else self.run

    def start(self, name: str, kind: OpenInferenceSpanKindValues, parent: Span, **at: Any) -> Span:
        context = trace_api.set_span_in_context(parent)
        attributes = {KIND: kind.value, SESSION: self.run_id, "contreact.run_id": self.run_id}
        return self.tracer.start_span(name, context, attributes=attributes, **at)

    def open_cycle(self, cycle: int, opening: str | None = None) -> None:
        with self.lock:
            if self.cycle is not None:
                if self.cycle[0] == cycle:
                    return
                self.cycle[1].end()
            span = self.start(f"cycle {cycle}", OpenInferenceSpanKindValues.CHAIN, self.run)
            span.set_attribute("contreact.cycle", cycle)
            if opening is not None:
                span.set_attribute(SpanAttributes.INPUT_VALUE, opening)
            self.cycle = (cycle, span)

    def close_cycle(self, cycle: int, payload: dict[str, Any]) -> None:
        with self.lock:
            if self.cycle is None or self.cycle[0] != cycle:
                return
            span = self.cycle[1]
            self.cycle = None
        span.set_attribute(SpanAttributes.OUTPUT_VALUE, str(payload.get("final_reflection") or ""))
        for name, value in (payload.get("metrics") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                span.set_attribute(f"contreact.metrics.{name}", value)
        span.end()

    def tool(self, cycle: int, payload: dict[str, Any]) -> None:
        """A TOOL span for a committed call: it ran `duration_s` up to now."""
        end = time.time_ns()
        seconds = payload.get("duration_s")
        took = int(float(seconds) * 1e9) if isinstance(seconds, int | float) else 0
        name = str(payload.get("tool_name") or "tool")
        parameters = json.dumps(payload.get("parameters"), ensure_ascii=False, default=str)
        with self.lock:
            parent = self.parent()
        span = self.start(name, OpenInferenceSpanKindValues.TOOL, parent, start_time=end - took)
        span.set_attributes(
            {
                SpanAttributes.TOOL_NAME: name,
                SpanAttributes.TOOL_PARAMETERS: parameters,
                SpanAttributes.INPUT_VALUE: parameters,
                SpanAttributes.INPUT_MIME_TYPE: "application/json",
                SpanAttributes.OUTPUT_VALUE: str(payload.get("output") or ""),
                "contreact.cycle": cycle,
                "contreact.step": int(payload.get("step") or 0),
                "contreact.call_id": str(payload.get("call_id") or ""),
                "contreact.refused": bool(payload.get("refused")),
                "contreact.truncated": bool(payload.get("truncated")),
            }
        )
        if payload.get("error"):
            span.set_status(Status(StatusCode.ERROR, str(payload.get("output") or "")[:200]))
        span.end(end_time=end)

    def committed(self, _scope: str, lines: Sequence[str]) -> None:
        """The events a commit of this drive added: cycles open and close, tools ran."""
        for text in lines:
            found = _EVENT_TYPE.search(text)
            if found is None or found.group(1) not in _TRACED_EVENTS:
                continue
            try:
                line = json.loads(text)
                cycle, payload = int(line["cycle_number"]), line["payload"]
                if found.group(1) == "CYCLE_START":
                    self.open_cycle(cycle, str(payload.get("opening") or ""))
                elif found.group(1) == "TOOL_CALL":
                    self.open_cycle(cycle)
                    self.tool(cycle, payload)
                else:
                    self.close_cycle(cycle, payload)
            except Exception as exc:  # noqa: BLE001 - a trace never stops a run
                log.debug("contreact: an event could not be traced: %s", detail(exc))

    def end(self, status: str, reason: str, failure: BaseException | None) -> None:
        with self.lock:
            if self.cycle is not None:
                self.cycle[1].end()
                self.cycle = None
        self.run.set_attribute("contreact.status", status)
        if reason:
            self.run.set_attribute("contreact.reason", reason)
        if failure is not None:
            self.run.record_exception(failure)
            self.run.set_status(Status(StatusCode.ERROR, detail(failure)))
        elif status == "failed":
            self.run.set_status(Status(StatusCode.ERROR, reason))
        self.run.end()


class _ModelCalls(OpenInferenceTracer):
    """OpenInference's LangChain tracer, kept to model calls, nested in the drive's spans."""

    def __init__(self, tracer: OITracer, drive: _Drive) -> None:
        super().__init__(tracer, False)  # type: ignore[arg-type] # as the instrumentor does
        self._drive = drive

    def _start_trace(self, run: Run) -> None:  # type: ignore[override]
        if run.run_type != "llm":
            self.run_map[str(run.id)] = run  # the bookkeeping the base class does
            return
        # The instrumentor names a run's session by LangGraph's thread: here, the run.
        metadata = dict((run.extra or {}).get("metadata") or {})
        metadata["session_id"] = self._drive.run_id
        run.extra = {**(run.extra or {}), "metadata": metadata}
        with self._drive.lock:
            parent = self._drive.parent()
        token = context_api.attach(trace_api.set_span_in_context(parent))
        try:
            super()._start_trace(run)
        finally:
            context_api.detach(token)

    def _end_trace(self, run: Run) -> None:  # type: ignore[override]
        if run.run_type != "llm":
            self.run_map.pop(str(run.id), None)
            return
        super()._end_trace(run)


def _cycle_in_flight(storage: Storage, run_id: str) -> int | None:
    """The cycle a resumed drive continues: begun and not closed (None: none is)."""
    engine = engine_for(storage)
    with engine.connect() as conn:
        query = select(func.max(events.c.cycle)).where(events.c.run_id == run_id)
        latest = conn.execute(query).scalar_one_or_none()
    if latest is None or payload_of(engine, run_id, keys.cycle_end(int(latest))) is not None:
        return None
    return int(latest) if payload_of(engine, run_id, keys.cycle_start(int(latest))) else None


@contextmanager
def drive(storage: Storage, record: RunRecord, protocol: str, where: str) -> Iterator[None]:
    """Trace one drive of `record`'s run to the collector at `where` (as shown to a person)."""
    setup = _set_up(protocol, where)
    run_id = record.run_id
    cycle = _cycle_in_flight(storage, run_id)
    span = setup.tracer.start_span(
        f"run {run_id}",
        attributes={
            KIND: OpenInferenceSpanKindValues.AGENT.value,
            SESSION: run_id,
            SpanAttributes.LLM_MODEL_NAME: record.model,
            "contreact.run_id": run_id,
            "contreact.model": record.model,
            "contreact.studies.batch": record.batch or "",
            "contreact.resumed": cycle is not None,
        },
    )
    traced = _Drive(run_id, setup.tracer, span)
    if cycle is not None:
        traced.open_cycle(cycle)
    tokens = (
        context_api.attach(trace_api.set_span_in_context(span)),
        setup.hook.set(_ModelCalls(setup.model_tracer, traced)),
        committed_watch.set(traced.committed),
    )
    failure: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        failure = exc
        raise
    finally:
        committed_watch.reset(tokens[2])
        setup.hook.reset(tokens[1])
        context_api.detach(tokens[0])
        status, reason = "unknown", ""
        try:
            now = get_run(engine_for(storage), run_id)
            status, reason = now.status, now.reason
        except Exception as exc:  # noqa: BLE001 - the storage may be what stopped the run
            reason = detail(exc)
        traced.end(status, reason, failure)
