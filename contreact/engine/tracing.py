"""A run's traces: OpenInference spans over OTLP, when the standard variables ask for them.

With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, each
drive of a run (its start, a resume, a reply, a fork) sends one trace: a span for the
run, one per cycle, one per model call and one per tool call, in OpenInference's
conventions, so Arize Phoenix or any OTLP collector shows it (`engine.spans`).
`OTEL_EXPORTER_OTLP_PROTOCOL` (or its traces variant) picks `http/protobuf`, the
default, or `grpc`; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` switch
tracing off, as for any OpenTelemetry program.

Unset, this module reads the environment and nothing else: no OpenTelemetry module is
imported and nothing is sent. The OpenTelemetry packages are the optional `otel` extra;
asked for without it, a run stops before it moves and says what to install.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from contreact.checkpoints.registry import RunRecord
from contreact.checkpoints.storage import Storage
from contreact.config import ConfigError

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""The variables that ask for traces (the traces-specific one first, as the SDK reads them)."""

PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")

SENT = ("http/protobuf", "grpc")
"""The OTLP protocols contreact sends traces over (the first is the default)."""

INSTALL_HINT = "pip install 'contreact[otel]'"


def endpoint_variable(environ: Mapping[str, str] | None = None) -> str | None:
    """The variable that asks for traces, or None when tracing is off.

    Off when no endpoint is set, and when OpenTelemetry's own switches say so
    (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`).
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    return next((name for name in ENDPOINTS if env.get(name, "").strip()), None)


def protocol(environ: Mapping[str, str] | None = None) -> str:
    """The OTLP protocol the variables name (`http/protobuf` when none does).

    Raises:
        ConfigError: A protocol contreact does not send (`http/json`, a typo).
    """
    env = os.environ if environ is None else environ
    for name in PROTOCOLS:
        value = env.get(name, "").strip()
        if value:
            if value not in SENT:
                raise ConfigError(
                    f"{name}={value}: contreact sends traces over {' or '.join(SENT)}"
                )
            return value
    return SENT[0]


def shown(url: str) -> str:
    """A collector's URL as printed: without user, password or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) or url


def collector(protocol: str, environ: Mapping[str, str] | None = None) -> str:
    """Where the spans go, as a warning names it (the URL the exporter posts to)."""
    env = os.environ if environ is None else environ
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return shown(traces)
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return shown(base if protocol == "grpc" else base.rstrip("/") + "/v1/traces")


@contextmanager
def traced(storage: Storage, record: RunRecord) -> Iterator[None]:
    """Trace this drive of `record`'s run if the variables ask for it; else do nothing.

    Raises:
        ConfigError: Traces are asked for with a protocol contreact does not send, or
            without the `otel` extra installed.
    """
    variable = endpoint_variable()
    if variable is None:
        yield
        return
    chosen = protocol()
    try:
        from contreact.engine import spans
    except ImportError:
        raise ConfigError(
            f"{variable} is set: traces need the `otel` extra ({INSTALL_HINT}), or unset {variable}"
        ) from None
    with spans.drive(storage, record, chosen, collector(chosen)):
        yield
