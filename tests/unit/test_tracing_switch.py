"""When a run is traced: the standard OpenTelemetry variables, read without importing it."""

from __future__ import annotations

import pytest

from contreact.config import ConfigError
from contreact.engine.tracing import collector, endpoint_variable, protocol, shown


def test_an_endpoint_turns_tracing_on_and_opentelemetrys_switches_turn_it_off() -> None:
    assert endpoint_variable({}) is None
    assert endpoint_variable({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}) is None
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:6006"}
    assert endpoint_variable(on) == "OTEL_EXPORTER_OTLP_ENDPOINT"
    traces = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:6006/v1/traces", **on}
    assert endpoint_variable(traces) == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    assert endpoint_variable({**on, "OTEL_SDK_DISABLED": "TRUE"}) is None
    assert endpoint_variable({**on, "OTEL_TRACES_EXPORTER": "none"}) is None
    assert endpoint_variable({**on, "OTEL_SDK_DISABLED": "false"}) is not None


def test_the_protocol_is_http_protobuf_unless_grpc_is_named() -> None:
    assert protocol({}) == "http/protobuf"
    assert protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    both = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert protocol(both) == "http/protobuf"
    with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_PROTOCOL=http/json: contreact"):
        protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_a_collectors_url_is_shown_without_its_credentials() -> None:
    assert shown("https://user:secret@collector:4318/v1/traces?token=x") == (
        "https://collector:4318/v1/traces"
    )
    assert shown("http://[::1]:4317") == "http://[::1]:4317"


def test_the_collector_is_named_as_the_exporter_posts_to_it() -> None:
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:6006/"}
    assert collector("http/protobuf", base) == "http://127.0.0.1:6006/v1/traces"
    assert collector("grpc", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}) == (
        "http://127.0.0.1:4317"
    )
    traces = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://u:p@h:1/t"}
    assert collector("http/protobuf", traces) == "http://h:1/t"
