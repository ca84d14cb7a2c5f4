"""The bundled Ollama-compatible stub server.

It lets ``contreact demo``, the test suite and the benchmarks run the real
``ChatOllama`` client over real HTTP with no Ollama binary and no model weights.

* :class:`StubServer` - the HTTP server (``/api/chat``, ``/api/embed``, ``/api/tags``,
  ``/api/show``, ``/api/version``) plus ``/_stub/`` control endpoints.
* Agents (:class:`ScriptedAgent`, :class:`SimulatedAgent`, :class:`LooperAgent`) -
  deterministic answerers: a reply is a pure function of the request.
* :mod:`contreact.stub.faults` - queued failures (HTTP errors, hangs, drops, mid-stream
  error lines, Ollama's tool-call parse error).
* :mod:`contreact.stub.ollama_api` (request/response bodies),
  :mod:`~contreact.stub.model_cards` (what the metadata endpoints say about a model),
  :mod:`~contreact.stub.inference` (``/api/chat`` and ``/api/embed``, faults included),
  :mod:`~contreact.stub.httpd` (HTTP plumbing), :mod:`~contreact.stub.request_log`,
  :mod:`~contreact.stub.control` (``/_stub/`` endpoints),
  :mod:`~contreact.stub.scenarios` (scenario files), :mod:`~contreact.stub.embedding`.
* :mod:`contreact.stub.real` - a real GGUF model behind the same API (the ``real`` extra),
  with :mod:`~contreact.stub.chat_templates` and :mod:`~contreact.stub.grammars`.
* ``python -m contreact.stub`` - the same server as a subprocess.

Importing this package does not import LangChain.
"""

from contreact.stub.agents import Agent, LooperAgent, ScriptedAgent, SimulatedAgent
from contreact.stub.embedding import embed_text
from contreact.stub.faults import TOOL_PARSE_ERROR_MESSAGE, Fault, FaultQueue
from contreact.stub.ollama_api import DEFAULT_EMBEDDING_MODELS, DEFAULT_MODELS, ChatRequest, Reply
from contreact.stub.scenarios import SCRIPTS_DIR, Scenario, load_scenario, resolve_scenario_path
from contreact.stub.server import StubServer

__all__ = [
    "DEFAULT_EMBEDDING_MODELS",
    "DEFAULT_MODELS",
    "SCRIPTS_DIR",
    "TOOL_PARSE_ERROR_MESSAGE",
    "Agent",
    "ChatRequest",
    "Fault",
    "FaultQueue",
    "LooperAgent",
    "Reply",
    "Scenario",
    "ScriptedAgent",
    "SimulatedAgent",
    "StubServer",
    "embed_text",
    "load_scenario",
    "resolve_scenario_path",
]
