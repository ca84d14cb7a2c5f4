"""The bundled Ollama stub server, driven through the real ChatOllama client over HTTP."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_ollama import ChatOllama, OllamaEmbeddings

from contreact.stub import (
    SCRIPTS_DIR,
    TOOL_PARSE_ERROR_MESSAGE,
    ChatRequest,
    LooperAgent,
    ScriptedAgent,
    SimulatedAgent,
    StubServer,
    embed_text,
    load_scenario,
)
from support.paths import SCENARIOS


def _tool(name: str, *params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": p} for p in params},
                "required": list(params),
            },
        },
    }


TOOLS = [
    _tool("write", "key", "value"),
    _tool("read", "key"),
    _tool("list"),
    _tool("delete", "key"),
    _tool("pattern_search", "pattern"),
    _tool("send_message_to_operator", "message"),
]
ALL_TOOL_NAMES = {t["function"]["name"] for t in TOOLS}


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer().start() as server:
        yield server


def chat(
    server: StubServer, model: str = "stub-model", timeout: float = 5, **kw: Any
) -> ChatOllama:
    return ChatOllama(model=model, base_url=server.url, client_kwargs={"timeout": timeout}, **kw)


def cycle_start(cycle: int) -> list[BaseMessage]:
    return [SystemMessage("You are a test agent."), HumanMessage(f"Cycle {cycle} begins.")]


def run_cycle(llm: Any, cycle: int, max_steps: int = 10) -> tuple[list[dict[str, Any]], str]:
    """Drive one ReAct cycle the way the engine does: tool results fed back in order."""
    messages = cycle_start(cycle)
    calls: list[dict[str, Any]] = []
    for _ in range(max_steps):
        reply = llm.invoke(messages)
        assert isinstance(reply, AIMessage)
        if not reply.tool_calls:
            return calls, str(reply.content)
        messages.append(reply)
        for call in reply.tool_calls:
            calls.append({"name": call["name"], "args": call["args"]})
            messages.append(ToolMessage(f"ok: {call['name']}", tool_call_id=call["id"]))
    raise AssertionError("cycle did not end")


# ------------------------------------------------------------------- chat basics


def test_streaming_text_arrives_in_several_chunks_and_reassembles(stub: StubServer) -> None:
    text = "The quick brown fox jumps over the lazy dog in cycle one."
    stub.agent = ScriptedAgent({1: [{"content": text}]})
    chunks = list(chat(stub).stream(cycle_start(1)))
    pieces = [c.content for c in chunks if c.content]
    assert len(pieces) > 1
    assert "".join(str(p) for p in pieces) == text
    # langchain-core appends an empty "last" marker chunk, so aggregate, as invoke does.
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    assert total.response_metadata["done_reason"] == "stop"
    assert total.usage_metadata is not None and total.usage_metadata["output_tokens"] > 0
    (record,) = stub.requests()
    assert record["body"]["stream"] is True and record["status"] == 200


def test_raw_stream_and_non_stream_shapes(stub: StubServer) -> None:
    stub.agent = ScriptedAgent({1: [{"content": "hello there world", "thinking": "hm"}]})
    body = {
        "model": "stub-model",
        "messages": [{"role": "user", "content": "Cycle 1 begins."}],
        "think": True,
    }
    with httpx.stream("POST", f"{stub.url}/api/chat", json=body, timeout=5) as r:
        assert r.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert [line["done"] for line in lines][-1] is True
    assert all(not line["done"] for line in lines[:-1])
    assert "".join(line["message"].get("thinking", "") for line in lines) == "hm"
    assert "".join(line["message"]["content"] for line in lines) == "hello there world"
    done = lines[-1]
    for key in (
        "total_duration",
        "load_duration",
        "prompt_eval_count",
        "prompt_eval_duration",
        "eval_count",
        "eval_duration",
    ):
        assert isinstance(done[key], int) and done[key] > 0, key
    assert done["prompt_eval_count"] == math.ceil(len("Cycle 1 begins.") / 4)

    whole = httpx.post(f"{stub.url}/api/chat", json={**body, "stream": False}, timeout=5).json()
    assert whole["done"] is True and whole["done_reason"] == "stop"
    assert whole["message"] == {
        "role": "assistant",
        "content": "hello there world",
        "thinking": "hm",
    }


def test_native_tool_calls_land_in_aimessage_tool_calls(stub: StubServer) -> None:
    reply = chat(stub).bind_tools(TOOLS).invoke(cycle_start(1))
    assert isinstance(reply, AIMessage)
    assert reply.content == ""
    (call,) = reply.tool_calls
    assert call["name"] == "write"
    assert isinstance(call["args"], dict)
    assert call["args"]["key"] == "topic-1"
    assert isinstance(call["args"]["value"], str) and call["args"]["value"]
    # The async path (used under the LangGraph dev server) parses the same stream.
    areply = asyncio.run(chat(stub).bind_tools(TOOLS).ainvoke(cycle_start(1)))
    assert [(c["name"], c["args"]) for c in areply.tool_calls] == [
        (c["name"], c["args"]) for c in reply.tool_calls
    ]
    sent = stub.requests()[0]["body"]
    assert [t["function"]["name"] for t in sent["tools"]] == [t["function"]["name"] for t in TOOLS]


def test_multiple_tool_calls_in_one_reply(stub: StubServer) -> None:
    stub.agent = ScriptedAgent(
        {1: [{"tool_calls": [{"name": "list"}, {"name": "read", "arguments": {"key": "a"}}]}]}
    )
    reply = chat(stub).bind_tools(TOOLS).invoke(cycle_start(1))
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("list", {}),
        ("read", {"key": "a"}),
    ]


def test_thinking_only_when_requested(stub: StubServer) -> None:
    llm = chat(stub, reasoning=True).bind_tools(TOOLS)
    reply = llm.invoke(cycle_start(1))
    thinking = reply.additional_kwargs.get("reasoning_content")
    assert isinstance(thinking, str) and "Cycle 1" in thinking
    assert stub.requests()[-1]["body"]["think"] is True

    plain = chat(stub).bind_tools(TOOLS).invoke(cycle_start(1))
    assert "reasoning_content" not in plain.additional_kwargs
    assert "think" not in stub.requests()[-1]["body"]  # reasoning=None sends no think at all
    assert plain.tool_calls[0]["args"] == reply.tool_calls[0]["args"]


def test_identical_requests_get_identical_replies() -> None:
    # Two separate servers: nothing carried over between them may influence the reply.
    replies = []
    for _ in range(2):
        with StubServer(SimulatedAgent(seed=3)) as server:
            llm = chat(server).bind_tools(TOOLS)
            history = cycle_start(4)
            first = llm.invoke(history)
            second = llm.invoke(history)  # same request again on the same server
            assert [c["args"] for c in first.tool_calls] == [c["args"] for c in second.tool_calls]
            replies.append(run_cycle(llm, 4))
    assert replies[0] == replies[1]


# ------------------------------------------------------------------ the agents


def test_simulated_agent_uses_all_six_tools_in_three_cycles(stub: StubServer) -> None:
    llm = chat(stub).bind_tools(TOOLS)
    used: set[str] = set()
    reflections = []
    for cycle in (1, 2, 3):
        calls, reflection = run_cycle(llm, cycle)
        used |= {c["name"] for c in calls}
        assert calls[0] == {"name": "write", "args": calls[0]["args"]}
        assert calls[0]["args"]["key"] == f"topic-{cycle}"
        assert 1 <= reflection.count(".") <= 4 and "I " in reflection
        reflections.append(reflection)
    assert used == ALL_TOOL_NAMES
    assert len(set(reflections)) == 3
    # Another model reflects differently on the same cycle.
    stub.add_model("other-model")
    _, other = run_cycle(chat(stub, model="other-model").bind_tools(TOOLS), 3)
    assert other != reflections[2]


def test_simulated_agent_answers_at_once_without_tools(stub: StubServer) -> None:
    reply = chat(stub).invoke(cycle_start(2))
    assert not reply.tool_calls
    assert "cycle 2" in str(reply.content).lower()


def test_scripted_cycle_and_step_selection_with_tools_withdrawn(stub: StubServer) -> None:
    stub.agent = ScriptedAgent(
        {
            1: [
                {"tool_calls": [{"name": "write", "arguments": {"key": "k{cycle}", "value": "v"}}]},
                {"content": "final {cycle} by {model}"},
            ],
            "2": [
                {"tool_calls": [{"name": "list"}]},
                {"content": "I stop here", "tool_calls": [{"name": "list"}]},
            ],
        },
        default={"content": "default answer for {cycle}"},
    )
    tooled = chat(stub).bind_tools(TOOLS)
    bare = chat(stub)
    step0 = tooled.invoke(cycle_start(1))
    assert step0.tool_calls[0]["args"] == {"key": "k1", "value": "v"}
    history = [
        *cycle_start(1),
        step0,
        ToolMessage("created", tool_call_id=step0.tool_calls[0]["id"]),
    ]
    assert tooled.invoke(history).content == "final 1 by stub-model"
    # Past the end of cycle 1's list, and a cycle the script does not know: the default.
    history += [AIMessage("final"), HumanMessage("more?")]
    assert tooled.invoke(history).content == "default answer for 1"
    assert tooled.invoke(cycle_start(7)).content == "default answer for 7"
    # Tools withdrawn: an obedient model answers with text instead of the scripted call.
    assert bare.invoke(cycle_start(2)).content == "Tools withdrawn; closing cycle 2."
    step1 = [*cycle_start(2), AIMessage("", tool_calls=[{"name": "list", "args": {}, "id": "x"}])]
    assert bare.invoke(step1).content == "I stop here"
    assert tooled.invoke(step1).tool_calls[0]["name"] == "list"


def test_scripted_fallback_reflection_and_text_tool_calls(stub: StubServer) -> None:
    text_call = '{"name": "write", "arguments": {"key": "a", "value": "b"}}'
    stub.agent = ScriptedAgent({1: [{"content": text_call}]})
    llm = chat(stub).bind_tools(TOOLS)
    reply = llm.invoke(cycle_start(1))
    assert reply.content == text_call and not reply.tool_calls
    assert llm.invoke(cycle_start(5)).content == "Reflection for cycle 5."


def test_looper_agent_never_stops_while_tools_are_offered(stub: StubServer) -> None:
    stub.agent = LooperAgent()
    llm = chat(stub).bind_tools(TOOLS)
    messages = cycle_start(2)
    keys = []
    for _ in range(5):
        reply = llm.invoke(messages)
        assert reply.tool_calls, "looper stopped calling tools"
        keys.append(reply.tool_calls[0]["args"]["key"])
        messages += [reply, ToolMessage("ok", tool_call_id=reply.tool_calls[0]["id"])]
    assert keys == [f"loop-2-{i}" for i in range(5)]
    assert chat(stub).invoke(messages).content == "Done looping in cycle 2."


def test_chat_request_derivation() -> None:
    req = ChatRequest.from_body(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Cycle 9 is not here"},
                {"role": "user", "content": "Cycle 12 begins."},
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "list", "arguments": {}}}],
                },
                {"role": "tool", "content": "none"},
                {"role": "assistant", "content": "x"},
                {"role": "user", "content": "Cycle 3 mention later"},
            ],
        }
    )
    assert (req.cycle, req.step, req.tools_offered) == (12, 2, False)
    assert req.cycle_tool_calls == [{"name": "list", "arguments": {}}]
    assert ChatRequest.from_body({"model": "m", "messages": []}).cycle == 1


# ------------------------------------------------------------------------ faults


@pytest.mark.parametrize(
    ("fault", "status", "message"),
    [
        ({"kind": "http", "status": 500, "error": "boom"}, 500, "boom"),
        ({"kind": "http", "status": 429}, 429, "too many requests"),
        ({"kind": "http", "status": 503}, 503, "server busy"),
        ({"kind": "http", "status": 400, "error": "bad options"}, 400, "bad options"),
        ({"kind": "tool_parse_error"}, 500, "error parsing tool call"),
        ({"kind": "error_line", "error": "model runner crashed"}, -1, "model runner crashed"),
    ],
)
def test_fault_raises_response_error_then_recovers(
    stub: StubServer, fault: dict[str, Any], status: int, message: str
) -> None:
    llm = chat(stub).bind_tools(TOOLS)
    stub.add_faults(fault)
    with pytest.raises(ollama.ResponseError) as info:
        llm.invoke(cycle_start(1))
    assert info.value.status_code == status
    assert message in info.value.error
    if fault["kind"] == "tool_parse_error":
        assert info.value.error == TOOL_PARSE_ERROR_MESSAGE
    assert llm.invoke(cycle_start(1)).tool_calls[0]["name"] == "write"
    first, second = stub.requests()
    assert (first["fault"], second["fault"]) == (fault["kind"], None)
    assert second["status"] == 200


@pytest.mark.parametrize("kind", ["drop", "drop_midstream"])
def test_dropped_connection_raises_httpx_error_then_recovers(stub: StubServer, kind: str) -> None:
    stub.agent = ScriptedAgent({1: [{"content": "one two three four five six seven"}]})
    llm = chat(stub)
    stub.add_faults({"kind": kind})
    received: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        for chunk in llm.stream(cycle_start(1)):
            received.append(str(chunk.content))
    if kind == "drop":
        assert received == []  # not even a status line
    else:
        # Exactly the first content chunk got through before the connection died.
        assert len(received) == 1 and received[0] and "seven" not in received[0]
    assert llm.invoke(cycle_start(1)).content == "one two three four five six seven"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("drop", httpx.RemoteProtocolError),
        ("drop_midstream", httpx.RemoteProtocolError),
        ("error_line", ollama.ResponseError),  # no "mid-stream" without a stream: a 500
    ],
)
def test_faults_on_non_streamed_chat_and_on_embed(
    stub: StubServer, kind: str, expected: type[Exception]
) -> None:
    client = ollama.Client(host=stub.url, timeout=5)
    messages = [{"role": "user", "content": "Cycle 1 begins."}]
    stub.add_faults({"kind": kind}, {"kind": kind, "path": "/api/embed"})
    with pytest.raises(expected):
        client.chat(model="stub-model", messages=messages, stream=False)
    with pytest.raises(expected):
        client.embed(model="stub-embed", input="hello")
    assert client.chat(model="stub-model", messages=messages, stream=False).message.content
    assert len(client.embed(model="stub-embed", input="hello").embeddings[0]) == 256
    assert [r["fault"] for r in stub.requests(None)] == [kind, kind, None, None]


def test_delay_beyond_timeout_is_a_read_timeout_and_short_delay_succeeds(stub: StubServer) -> None:
    llm = chat(stub, timeout=0.3)
    stub.add_faults({"kind": "delay", "seconds": 1.5})
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        llm.invoke(cycle_start(1))
    assert time.monotonic() - started < 1.2
    stub.add_faults({"kind": "delay", "seconds": 0.15})
    started = time.monotonic()
    assert llm.invoke(cycle_start(1)).content
    assert time.monotonic() - started >= 0.15
    assert [r["fault"] for r in stub.requests()] == ["delay", "delay"]


def test_faults_match_path_and_model_and_stay_queued_otherwise(stub: StubServer) -> None:
    stub.add_model("other")
    stub.add_faults(
        {"kind": "http", "status": 500, "model": "other"},
        {"kind": "http", "status": 503, "path": "/api/embed"},
        {"kind": "http", "status": 502, "times": 2},
    )
    llm = chat(stub)
    # The first request (stub-model chat) skips the model- and path-bound faults.
    for _ in range(2):
        with pytest.raises(ollama.ResponseError) as info:
            llm.invoke(cycle_start(1))
        assert info.value.status_code == 502
    assert llm.invoke(cycle_start(1)).content
    assert len(stub.pending_faults()) == 2
    with pytest.raises(ollama.ResponseError) as info:
        chat(stub, model="other:latest").invoke(cycle_start(1))
    assert info.value.status_code == 500
    with pytest.raises(ollama.ResponseError) as info:
        OllamaEmbeddings(model="stub-embed", base_url=stub.url).embed_query("x")
    assert info.value.status_code == 503
    assert stub.pending_faults() == []


def test_invalid_fault_is_rejected() -> None:
    with pytest.raises(ValueError, match="kind"):
        StubServer(faults=[{"kind": "explode"}])


# ---------------------------------------------------------------------- models


def test_unknown_model_is_ollamas_404(stub: StubServer) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        chat(stub, model="nope:7b").invoke("hi")
    assert info.value.status_code == 404
    assert info.value.error == 'model "nope:7b" not found, try pulling it first'
    assert stub.requests()[0]["status"] == 404


def test_add_and_remove_models_in_process_and_over_http(stub: StubServer) -> None:
    chat(stub, model="stub-model:latest").invoke("Cycle 1 begins.")  # tag-insensitive
    stub.add_model("fresh:1b")
    assert chat(stub, model="fresh:1b").invoke("hi").content
    stub.remove_model("fresh:1b")
    with pytest.raises(ollama.ResponseError):
        chat(stub, model="fresh:1b").invoke("hi")

    r = httpx.post(
        f"{stub.url}/_stub/models", json={"add": ["late:2b"], "remove": ["stub-model"]}, timeout=5
    )
    assert r.status_code == 200
    names = [m["name"] for m in httpx.get(f"{stub.url}/api/tags", timeout=5).json()["models"]]
    assert names == ["late:2b", "stub-embed:latest"]
    with pytest.raises(ollama.ResponseError) as info:
        chat(stub).invoke("hi")
    assert info.value.status_code == 404
    assert chat(stub, model="late:2b").invoke("hi").content


def test_metadata_endpoints(stub: StubServer) -> None:
    assert httpx.get(stub.url, timeout=5).text == "Ollama is running"
    assert httpx.head(stub.url, timeout=5).status_code == 200
    assert httpx.get(f"{stub.url}/api/version", timeout=5).json()["version"]
    show = httpx.post(f"{stub.url}/api/show", json={"model": "stub-model"}, timeout=5).json()
    assert show["capabilities"] == ["completion", "tools"]
    embed = httpx.post(f"{stub.url}/api/show", json={"model": "stub-embed"}, timeout=5).json()
    assert embed["capabilities"] == ["embedding"]
    missing = httpx.post(f"{stub.url}/api/show", json={"model": "x"}, timeout=5)
    assert missing.status_code == 404 and "not found" in missing.json()["error"]
    client = ollama.Client(host=stub.url, timeout=5)
    assert {m.model for m in client.list().models} == {"stub-model:latest", "stub-embed:latest"}
    assert [r["path"] for r in stub.requests(None)] == [
        "/api/version",
        "/api/show",
        "/api/show",
        "/api/show",
        "/api/tags",
    ]


def test_model_without_tool_support_rejects_tools(stub: StubServer) -> None:
    stub.add_model("tiny", capabilities=["completion"])
    with pytest.raises(ollama.ResponseError) as info:
        chat(stub, model="tiny").bind_tools(TOOLS).invoke("Cycle 1 begins.")
    assert info.value.status_code == 400 and "does not support tools" in info.value.error
    assert chat(stub, model="tiny").invoke("Cycle 1 begins.").content


# ------------------------------------------------------------------ embeddings


def test_embeddings_are_deterministic_and_cosine_behaves(stub: StubServer) -> None:
    emb = OllamaEmbeddings(model="stub-embed", base_url=stub.url)
    a, b, c, d = emb.embed_documents(
        [
            "I explored prime numbers and wrote notes about them.",
            "I explored prime numbers and wrote notes about them.",
            "Tidal rhythms keep ancient coastal clocks.",
            "I explored prime numbers and then deleted old notes.",
        ]
    )

    def cos(x: list[float], y: list[float]) -> float:
        return sum(p * q for p, q in zip(x, y, strict=True))

    assert len(a) == 256
    assert cos(a, a) == pytest.approx(1.0)
    assert cos(a, b) == pytest.approx(1.0)
    assert abs(cos(a, c)) < 0.3
    assert cos(a, d) > 0.5
    assert emb.embed_query("Tidal rhythms keep ancient coastal clocks.") == c
    assert embed_text("Tidal rhythms keep ancient coastal clocks.") == pytest.approx(c)
    with pytest.raises(ollama.ResponseError) as info:
        OllamaEmbeddings(model="stub-model", base_url=stub.url).embed_query("x")
    assert info.value.status_code == 400


# ------------------------------------------------------- control, record, concurrency


def test_control_endpoints_over_http(stub: StubServer) -> None:
    queued = httpx.post(
        f"{stub.url}/_stub/faults", json=[{"kind": "http", "status": 500}], timeout=5
    )
    assert queued.json() == {"queued": 1}
    bad = httpx.post(f"{stub.url}/_stub/faults", json=[{"kind": "nope"}], timeout=5)
    assert bad.status_code == 400
    with pytest.raises(ollama.ResponseError):
        chat(stub).invoke("Cycle 1 begins.")
    chat(stub).invoke("Cycle 1 begins.")
    record = httpx.get(f"{stub.url}/_stub/requests", timeout=5).json()
    assert [(r["n"], r["path"], r["fault"], r["status"]) for r in record] == [
        (1, "/api/chat", "http", 500),
        (2, "/api/chat", None, 200),
    ]
    assert record[1]["body"]["messages"] == [{"role": "user", "content": "Cycle 1 begins."}]
    assert httpx.post(f"{stub.url}/_stub/reset", timeout=5).status_code == 200
    assert httpx.get(f"{stub.url}/_stub/requests", timeout=5).json() == []


def test_record_file_gets_one_json_line_per_request(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "requests.jsonl"
    with StubServer(record=path).start() as server:
        chat(server).invoke("Cycle 1 begins.")
        httpx.get(f"{server.url}/api/tags", timeout=5)
        # Flushed per line: readable while the server still runs.
        lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["n"], r["path"]) for r in lines] == [(1, "/api/chat"), (2, "/api/tags")]


def test_many_concurrent_clients_with_latency() -> None:
    with StubServer(latency_ms=150).start() as server:
        llm = chat(server)
        results: dict[int, str] = {}
        errors: list[BaseException] = []

        def worker(cycle: int) -> None:
            try:
                results[cycle] = str(llm.invoke(cycle_start(cycle)).content)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(c,)) for c in range(1, 33)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
    assert not errors
    assert len(results) == 32 and all(f"cycle {c}" in results[c].lower() for c in results)
    assert 0.15 <= elapsed < 2.0  # served in parallel, not 32 x 150 ms


def test_stop_closes_keep_alive_connections() -> None:
    server = StubServer().start()
    llm = chat(server, timeout=2)
    llm.invoke("Cycle 1 begins.")  # leaves a pooled keep-alive connection
    port = server.port
    server.stop()
    with pytest.raises((ConnectionError, httpx.HTTPError)):
        llm.invoke("Cycle 1 begins.")
    # A server restarted on the same port (crash/outage tests) serves the same client.
    with StubServer(port=port).start():
        assert llm.invoke("Cycle 1 begins.").content


# ------------------------------------------------------------------- scenarios, CLI


def test_bundled_demo_scenario_and_yaml_scripts(tmp_path: Path) -> None:
    demo = load_scenario("demo")
    assert isinstance(demo.agent, SimulatedAgent) and demo.models == ("stub-model",)
    path = tmp_path / "s.yaml"
    path.write_text(
        "agent: scripted\nmodels: [a, b]\nlatency_ms: 5\n"
        "script:\n  1:\n    - content: 'hello {model}'\n"
        "faults:\n  - {kind: http, status: 503}\n"
    )
    with StubServer.from_scenario(path, models=["b"]).start() as server:
        assert server.latency_ms == 5
        with pytest.raises(ollama.ResponseError):
            chat(server, model="b").invoke("Cycle 1 begins.")
        assert chat(server, model="b").invoke("Cycle 1 begins.").content == "hello b"
    path.write_text("agent: scripted\nscirpt: {}\n")
    with pytest.raises(ValueError, match="scirpt"):
        load_scenario(path)


def test_every_scenario_file_loads_and_text_tools_pass_through_verbatim() -> None:
    bundled = sorted(p.stem for p in SCRIPTS_DIR.glob("*.yaml"))
    for name in bundled:
        load_scenario(name)
    ours = sorted(SCENARIOS.glob("*.yaml"))
    assert {"demo", "looper", "text-tools", "empty", "flaky"} <= {*bundled, *(p.stem for p in ours)}
    for path in ours:
        load_scenario(path)
    with StubServer.from_scenario(SCENARIOS / "text-tools.yaml").start() as server:
        llm = chat(server).bind_tools(TOOLS)
        first = llm.invoke(cycle_start(1))
        assert not first.tool_calls  # text-format calls are the client's job to parse
        assert json.loads(str(first.content)) == {
            "name": "write",
            "arguments": {"key": "json-1", "value": "stored via a JSON object"},
        }
        react = llm.invoke([*cycle_start(3), AIMessage("x"), HumanMessage("go on")])
        assert str(react.content).startswith("Action: send_message_to_operator:")
    with StubServer.from_scenario(SCENARIOS / "flaky.yaml").start() as server:
        assert [f["kind"] for f in server.pending_faults()] == [
            "http",
            "error_line",
            "drop",
            "http",
        ]
