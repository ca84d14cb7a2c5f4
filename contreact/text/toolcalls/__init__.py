"""Layered tool-call parser: one model message in, tool calls / final answer / nothing out.

Why this package exists: local models served by Ollama do not reliably use the native
tool-calling channel. Depending on the model family, its template and the prompt, a
call arrives as a native ``tool_calls`` entry, as JSON in the text, inside
``<tool_call>`` tags, in the family's own special tokens (Mistral, DeepSeek, Kimi,
gpt-oss harmony, Functionary, Python-call syntax, ...) or as ReAct text. The ``parse``
node hands every model message to :func:`parse_response` and routes on the outcome:

* :class:`ToolCalls` -- run them (calls carrying an ``error`` are answered with that
  error instead of being run);
* :class:`FinalAnswer` -- the cycle's reflection;
* :class:`NoAnswer` -- send ``feedback`` as a corrective user turn (``reason`` says why).

Everything here is pure and total: no I/O, no global state, and :func:`parse_response`
never raises and never hangs, whatever the model produced (huge messages, unbalanced
braces, deeply nested JSON, odd Unicode). JSON is found with
:meth:`json.JSONDecoder.raw_decode` at candidate ``{`` positions rather than with greedy
regular expressions, and every regular expression is written so that it cannot
backtrack catastrophically.

Modules: ``outcomes`` (what is returned), ``parser`` (the entry point and layer order),
``layers/`` (native, JSON, tags, dialects, harmony, pythonic, ReAct), ``thinking``,
``coercion``, ``calls`` (checking a call against its schema), ``placeholders``
(echoed format instructions), ``markup`` (unreadable markup), ``feedback`` (the texts
sent back to the model), ``text`` (small helpers).
"""

from contreact.text.toolcalls.coercion import coerce_arguments
from contreact.text.toolcalls.feedback import (
    echo_feedback,
    empty_feedback,
    malformed_feedback,
    markup_feedback,
    server_parse_error,
)
from contreact.text.toolcalls.outcomes import (
    INTERNAL_ERROR_PREFIX,
    FinalAnswer,
    Layer,
    NoAnswer,
    NoAnswerReason,
    Parsed,
    ParsedCall,
    ToolCalls,
    ToolSchemas,
)
from contreact.text.toolcalls.parser import call_signature, parse_response
from contreact.text.toolcalls.thinking import strip_thinking

__all__ = [
    "INTERNAL_ERROR_PREFIX",
    "FinalAnswer",
    "Layer",
    "NoAnswer",
    "NoAnswerReason",
    "ParsedCall",
    "Parsed",
    "ToolCalls",
    "ToolSchemas",
    "call_signature",
    "coerce_arguments",
    "echo_feedback",
    "empty_feedback",
    "malformed_feedback",
    "markup_feedback",
    "parse_response",
    "server_parse_error",
    "strip_thinking",
]
