"""Property tests: no model output breaks the parser or the storage path.

Hypothesis writes the hostile values: integers past 64 bits, NaN and infinities, lone
surrogates, NUL and escape characters, deep nesting, as tool-call arguments (native and
as JSON text) and as plain content. For every one, `parse_response` classifies without
reaching its own crash guard, and what it yields, made `storable`, goes through the
checkpoint serializer and JSON (the event log) and comes back equal; converting is
lossless for the numbers and a no-op the second time.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from contreact.checkpoints.saver import serializer
from contreact.nodes.storable import storable
from contreact.text.toolcalls import (
    INTERNAL_ERROR_PREFIX,
    FinalAnswer,
    NoAnswer,
    ToolCalls,
    parse_response,
)
from contreact.tools.registry import PARAMETER_SCHEMAS

HOSTILE_TEXT = st.text(
    alphabet=st.characters(codec=None, categories=None), max_size=40
) | st.sampled_from(["\ud800", "a\udfffb", "\x00", "\x1b]0;pwned\x07", "\x1b[2J", "\u202e", ""])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**500), max_value=10**500)
    | st.floats(allow_nan=True, allow_infinity=True)
    | HOSTILE_TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE_TEXT, inner, max_size=4),
    max_leaves=30,
)
DEEP = st.integers(min_value=1, max_value=3000).map(lambda n: _nested(n))
ARGS = st.dictionaries(
    st.sampled_from(["key", "value", "query", "x"]) | HOSTILE_TEXT, VALUES | DEEP
)
NAMES = st.sampled_from(sorted(PARAMETER_SCHEMAS)) | HOSTILE_TEXT


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _round_trips(value: Any) -> None:
    """`value` survives the checkpoint serializer and the event log's JSON unchanged."""
    serde = serializer()
    assert serde.loads_typed(serde.dumps_typed(value)) == value
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    assert json.loads(text) == value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES | DEEP)
def test_storable_values_survive_checkpoint_and_log_and_convert_losslessly(value: Any) -> None:
    kept, changed = storable(value)
    _round_trips(kept)
    assert storable(kept) == (kept, False)
    if isinstance(value, int) and not isinstance(value, bool):
        assert int(kept) == value
    if isinstance(value, float):
        assert float(kept) == value or (math.isnan(value) and kept == "nan")
    if not changed:
        assert kept == value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES, args=ARGS, as_text=st.booleans(), prefix=HOSTILE_TEXT)
def test_no_tool_call_breaks_the_parser_or_the_checkpoint(
    name: str, args: dict[str, Any], as_text: bool, prefix: str
) -> None:
    if as_text:
        try:
            call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        except RecursionError:  # json.dumps's own limit; deep text is in the fuzz suite
            assume(False)
        parsed = parse_response(prefix + call, [], PARAMETER_SCHEMAS)
    else:
        parsed = parse_response(prefix, [{"name": name, "args": args}], PARAMETER_SCHEMAS)
    assert isinstance(parsed, ToolCalls | FinalAnswer | NoAnswer)
    if isinstance(parsed, NoAnswer):
        assert not parsed.detail.startswith(INTERNAL_ERROR_PREFIX), parsed.detail
    if isinstance(parsed, ToolCalls):
        stored = [storable(c.args)[0] for c in parsed.calls]
        message = AIMessage(
            content=storable(parsed.text)[0],
            tool_calls=[
                {"name": storable(c.name)[0], "args": a, "id": f"c{i}", "type": "tool_call"}
                for i, (c, a) in enumerate(zip(parsed.calls, stored, strict=True))
            ],
        )
        serde = serializer()
        assert serde.loads_typed(serde.dumps_typed(message)).tool_calls == message.tool_calls


@settings(max_examples=150, deadline=None)
@given(content=HOSTILE_TEXT | VALUES.map(lambda v: json.dumps(v, ensure_ascii=False)))
def test_no_plain_content_breaks_the_parser(content: str) -> None:
    parsed = parse_response(content, [], PARAMETER_SCHEMAS)
    assert isinstance(parsed, ToolCalls | FinalAnswer | NoAnswer)
    if isinstance(parsed, NoAnswer):
        assert not parsed.detail.startswith(INTERNAL_ERROR_PREFIX), parsed.detail
    if isinstance(parsed, FinalAnswer):
        _round_trips(storable(parsed.text)[0])
