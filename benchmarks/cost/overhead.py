"""(a) Per-step overhead of contreact against a minimal hand-written Ollama loop.

What it measures: the wall time of one ReAct step (one model call and what follows it)
in contreact, divided by the same for a minimal loop written by hand - plain
``ChatOllama`` calls, a list of messages, a dict for memory, no checkpoints, no journal,
no events - at 0 ms and at 100 ms model latency.

How: both loops talk to the same stub server (``python -m contreact.stub`` in a child
process, so its CPU work does not compete for this interpreter's GIL) over real HTTP,
playing the same constant-work script (each cycle: ``write note``, ``read note``, final
answer: three model calls). Both send the same system prompt, the same previous-
reflections section, the same six tool schemas and the same model options. contreact
runs in this process through ``contreact.engine.runner.start_run`` on a real SQLite database
(or PostgreSQL with ``--db-url``) with its defaults: ``durability="sync"``, journaled
model and tool calls, the event log, the similarity monitor. The number of model calls
is checked to be equal for both loops.

Step time is steady state: the time from the end of cycle 1 to the end of the last
cycle, divided by the model calls in between, so one-off costs (registering the run,
compiling the graph, opening the checkpointer, the first HTTP connection) are excluded;
the whole-run times are printed too. Baseline and contreact runs alternate (in both
orders) and the medians are compared, so both see the same machine load. The ratio at
0 ms latency has the target (<= 1.5x): that is where the framework's own cost shows;
at 100 ms it is diluted by the model.

``--profile`` adds a breakdown of contreact's step time: engine functions wrapped with
timers (model call, journal, event rows, JSONL mirror, checkpoint writes, ...; see
``benchmarks/timers.py``; the remainder is LangGraph's loop and node glue), per node
(from the runner's progress events), and per component from a sampling profiler that
also sees LangGraph's checkpoint-writing thread (``benchmarks/sampling.py``).

``--ablate`` is a diagnostic, not a figure: it re-measures contreact's step time with one
mechanism at a time switched off or swapped by monkeypatching in this process (the
engine's code is not changed): the SQLite checkpointer replaced by LangGraph's
in-memory saver, ``durability="async"``/``"exit"`` instead of ``"sync"``, no JSONL log
mirror, no event rows, no journal look-up, no fork-point check per step, no connection
pre-ping (PostgreSQL; a no-op on SQLite), no similarity monitor.
The difference to the unchanged engine is what that mechanism costs per step. Two
references frame it: the same five-node graph in plain LangGraph (with and without a
checkpointer) and the hand-written loop.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    MODEL,
    BenchStorage,
    Figure,
    StubProcess,
    bench_storage,
    constant_work_scenario,
    median,
    now,
    parser,
    print_table,
    report,
    run_config,
)
from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

from contreact.engine.outcome import SilentProgress


class State(TypedDict):
    """State of the plain-LangGraph reference graph (see `langgraph_floor_loop`)."""

    messages: Annotated[list[AnyMessage], add_messages]
    cycle: int
    outcome: str


Mark = tuple[float, float]
"""(``perf_counter()``, ``process_time()``): wall clock and this process's CPU time."""


def mark() -> Mark:
    """Read both clocks."""
    return now(), time.process_time()


def baseline_loop(host: str, cycles: int, model_options: dict[str, Any]) -> list[Mark]:
    """The minimal hand-written loop: ChatOllama, a message list, a dict for memory.

    Args:
        host: The stub's URL.
        cycles: Cycles to run.
        model_options: Ollama options, as contreact sends them.

    Returns:
        Wall and CPU clock readings at the end of each cycle (index 0 = cycle 1).
    """
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_ollama import ChatOllama

    from contreact.nodes.prompts import REFLECTIONS_HEADING, SYSTEM_PROMPT
    from contreact.tools.registry import TOOL_SCHEMAS

    llm = ChatOllama(
        model=MODEL, base_url=host, keep_alive="5m", client_kwargs={"timeout": 60}
    ).bind_tools(TOOL_SCHEMAS)
    memory: dict[str, str] = {}
    notes: list[str] = []
    ends: list[Mark] = []
    for cycle in range(1, cycles + 1):
        system = SYSTEM_PROMPT
        if notes:
            system += "\n\n" + "\n\n".join([REFLECTIONS_HEADING, *notes])
        messages: list[BaseMessage] = [
            SystemMessage(system),
            HumanMessage(f"Cycle {cycle} begins."),
        ]
        for _ in range(10):
            reply = llm.invoke(messages, options=model_options)
            messages.append(reply)
            if not reply.tool_calls:
                notes.append(f"Cycle {cycle}: {reply.content}")
                break
            for call in reply.tool_calls:
                args = call["args"]
                if call["name"] == "write":
                    memory[args["key"]] = args["value"]
                    output = f"Stored '{args['key']}'."
                else:
                    output = memory.get(args.get("key", ""), "Error: no such key.")
                messages.append(ToolMessage(output, tool_call_id=call["id"] or "x"))
        ends.append(mark())
    return ends


class CycleClock(SilentProgress):
    """A runner `Progress` that notes when cycles end and how long each node's events span.

    Per node it adds up the time from the node's task-start event to its update event,
    and separately the time from an update to the next task start. LangGraph hands the
    stream's events over in batches, so these intervals are approximate: a node's
    interval also holds some of LangGraph's work around it.
    """

    def __init__(self) -> None:
        self.ends: list[Mark] = []
        self.node_time: defaultdict[str, float] = defaultdict(float)
        self.node_count: Counter[str] = Counter()
        self.between = 0.0
        self._last = self._start = now()

    def started(self, record: Any, state: Any, resumed: bool) -> None:
        """Start the clock."""
        self._last = now()

    def node_started(self, node: str) -> None:
        """Charge the time since the previous update to LangGraph; start the node's clock."""
        self._start = now()
        self.between += self._start - self._last

    def update(self, node: str, update: dict[str, Any]) -> None:
        """Charge the time since the node started to ``node``; note cycle ends."""
        t = now()
        self.node_time[node] += t - self._start
        self.node_count[node] += 1
        self._last = t
        if node == "reflect":
            self.ends.append(mark())


def contreact_loop(
    host: str,
    cycles: int,
    where: BenchStorage,
    clock: CycleClock | None = None,
    **extra: Any,
) -> list[Mark]:
    """Run contreact in this process for ``cycles`` cycles.

    Args:
        host: The stub's URL.
        cycles: Cycles to run.
        where: Storage for the run.
        clock: Progress recorder to use (a fresh one if None).
        **extra: Config overrides (e.g. ``similarity={"enabled": False}``).

    Returns:
        Wall and CPU clock readings at the end of each cycle.
    """
    from contreact.config import parse_config
    from contreact.engine.runner import start_run

    clock = clock or CycleClock()
    run_id = f"overhead-{uuid.uuid4().hex[:8]}"
    config = parse_config(run_config(run_id, host, cycles, where, **extra), "benchmark")
    outcome = start_run(config, where.storage(), progress=clock)
    if outcome.status != "completed":
        raise RuntimeError(f"contreact run ended {outcome.status}: {outcome.reason}")
    return clock.ends


def steady_step_s(ends: list[Mark], steps_after_first: int, cpu: bool = False) -> float:
    """Wall (or this process's CPU) seconds per step from the end of cycle 1 to the end."""
    i = 1 if cpu else 0
    return (ends[-1][i] - ends[0][i]) / steps_after_first


def measure(
    stub: StubProcess, where: BenchStorage, cycles: int, reps: int
) -> dict[str, list[float]]:
    """Alternate baseline and contreact runs; return per-step times and whole-run times.

    Args:
        stub: The running stub.
        where: Storage for contreact's runs.
        cycles: Cycles per run.
        reps: Runs of each loop.

    Returns:
        Seconds per step (``baseline``, ``contreact``), CPU seconds of this process per
        step (``..._cpu``) and seconds per whole run (``..._run``), one value per run.
    """
    from contreact.config.sections import DEFAULT_MODEL_OPTIONS

    options = dict(DEFAULT_MODEL_OPTIONS)
    loops: dict[str, Callable[[], list[Mark]]] = {
        "baseline": lambda: baseline_loop(stub.url, cycles, options),
        "contreact": lambda: contreact_loop(stub.url, cycles, where),
    }
    out: dict[str, list[float]] = {
        f"{k}{suffix}": [] for k in ("baseline", "contreact") for suffix in ("", "_cpu", "_run")
    }
    calls: dict[str, set[int]] = {"baseline": set(), "contreact": set()}
    # Warm-up (imports, first connections, SQLAlchemy statement caches), not measured.
    for name in loops:
        stub.reset()
        baseline_loop(stub.url, 2, options) if name == "baseline" else contreact_loop(
            stub.url, 2, where
        )
    for rep in range(reps):
        order = ["baseline", "contreact"] if rep % 2 == 0 else ["contreact", "baseline"]
        for name in order:
            stub.reset()
            started = now()
            ends = loops[name]()
            out[f"{name}_run"].append(now() - started)
            requests = stub.requests()
            calls[name].add(len(requests))
            first_cycle_calls = sum(1 for r in requests if _opens_or_in_cycle_1(r))
            steps = len(requests) - first_cycle_calls
            out[name].append(steady_step_s(ends, steps))
            out[f"{name}_cpu"].append(steady_step_s(ends, steps, cpu=True))
    if calls["baseline"] != calls["contreact"] or len(calls["baseline"]) != 1:
        raise RuntimeError(f"model calls differ: {calls}")
    return out


def _opens_or_in_cycle_1(request: dict[str, Any]) -> bool:
    """Whether a recorded request belongs to cycle 1 (its first user turn says so)."""
    users = [m for m in request["body"]["messages"] if m.get("role") == "user"]
    return bool(users) and str(users[0].get("content", "")).startswith("Cycle 1 ")


def profile(stub: StubProcess, where: BenchStorage, cycles: int) -> None:
    """Print where contreact's step time goes: timed functions, nodes, sampled components."""
    from sampling import Sampler, shares
    from timers import Timers

    clock = CycleClock()
    started = now()
    with Timers() as timers:
        contreact_loop(stub.url, cycles, where, clock)
    steps = clock.node_count["invoke"]
    step_ms = (clock.ends[-1][0] - started) / steps * 1000
    rows = timers.rows(steps, step_ms)
    rest = step_ms - timers.top_level_ms(steps)
    rows.append(
        ["rest: LangGraph loop + channels, node glue, runner", "", rest, f"{rest / step_ms:.0%}"]
    )
    rows.append(["whole step (this run, incl. setup)", steps, step_ms, "100%"])
    print_table(
        [
            "function (inclusive wall time; indented = inside the row above)",
            "calls",
            "ms/step",
            "share",
        ],
        rows,
        title=f"Profile at 0 ms latency: {cycles} cycles, {steps} model calls, engine functions "
        "wrapped with timers",
    )
    print_table(
        ["node (task-start event -> update event)", "supersteps", "ms/step"],
        [
            [node, clock.node_count[node], clock.node_time[node] / steps * 1000]
            for node in ("assemble", "invoke", "parse", "dispatch", "reflect")
        ]
        + [["between an update and the next task start", "", clock.between / steps * 1000]],
        title="Per node (the stream hands events over in batches, so a node's interval also "
        "holds LangGraph's work around it, e.g. the previous checkpoint write)",
    )
    sampler = Sampler().start()
    contreact_loop(stub.url, cycles, where)
    counts = sampler.stop()
    print_table(
        ["component (sampled wall time, all threads)", "share", "ms/step at the timed run's pace"],
        [[name, f"{share:.1%}", share * step_ms] for name, share in shares(counts)],
        title="Sampled (benchmarks/sampling.py; the sampler itself slows the run)",
    )


@contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def in_memory_checkpointer() -> AbstractContextManager[None]:
    """Swap the runner's checkpointer for LangGraph's `InMemorySaver`."""
    from langgraph.checkpoint.memory import InMemorySaver

    import contreact.engine.runner as runner

    @contextmanager
    def open_saver(storage: Any) -> Iterator[Any]:
        yield InMemorySaver()

    return _patched(runner, "open_saver", open_saver)


def durability(mode: str) -> AbstractContextManager[None]:
    """Make the runner stream with another `durability` than its ``"sync"``."""
    import contreact.engine.runner as runner

    original = runner.builder

    class Builder:
        def compile(self, **kwargs: Any) -> Any:
            graph = original.compile(**kwargs)
            stream = graph.stream

            def patched(*args: Any, **kw: Any) -> Any:
                kw["durability"] = mode
                return stream(*args, **kw)

            graph.stream = patched  # type: ignore[method-assign]
            return graph

    return _patched(runner, "builder", Builder())


def no_jsonl() -> AbstractContextManager[None]:
    """Skip appending committed events to the JSONL mirror."""
    import contreact.checkpoints.journal as journal

    return _patched(journal, "mirror_lines", lambda *args: None)


def no_recall() -> AbstractContextManager[None]:
    """Skip the journal look-up before each side effect (safe only for a fresh run)."""
    from contreact.checkpoints.journal import Ledger

    return _patched(Ledger, "recall", lambda self, key: Ledger.MISSING)


def no_event_rows() -> AbstractContextManager[None]:
    """Skip inserting event rows (the journal rows and memory changes still commit)."""
    import contreact.checkpoints.journal as journal

    return _patched(journal, "write_record", without_events(journal.write_record))


def without_events(write: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """`journal.write_record` that stores the record and drops its events (both backends)."""
    return lambda conn, run_id, record, batch: write(conn, run_id, record, [])


def no_lineage_check() -> AbstractContextManager[None]:
    """Skip the per-step fork-point check (one query per node; safe on a run's main line)."""
    import contreact.nodes.step as session

    return _patched(session, "lineage_of", lambda state, runtime: state.lineage)


@contextmanager
def no_pre_ping() -> Iterator[None]:
    """Open PostgreSQL engines without ``pool_pre_ping`` (a round trip per checkout)."""
    import contreact.checkpoints.engines as engines

    original = engines.create_engine

    def create_engine(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("pool_pre_ping", None)
        return original(*args, **kwargs)

    engines.dispose_engines()
    try:
        with _patched(engines, "create_engine", create_engine):
            yield
    finally:
        engines.dispose_engines()


def langgraph_floor_loop(
    host: str,
    cycles: int,
    where: BenchStorage,
    saver: bool,
    durability: Literal["sync", "async", "exit"] = "sync",
    on_cycle: Callable[[int], None] | None = None,
    per_cycle: bool = False,
    bookkeeping: bool = False,
) -> list[Mark]:
    """The same graph shape in plain LangGraph: no journal, events, registry or budgets.

    Five nodes like contreact's (assemble, invoke, parse, dispatch, reflect), the same
    model call, a dict for memory, earlier notes kept outside the state; checkpointed
    by the storage's saver with ``durability="sync"`` (or not checkpointed at all).

    Args:
        host: The stub's URL.
        cycles: Cycles to run.
        where: Storage whose checkpointer to use.
        saver: False to compile the graph without a checkpointer.
        durability: LangGraph's durability mode when there is a saver.
        on_cycle: Called with the cycle number at the end of each cycle (in ``reflect``).
        per_cycle: Checkpoint once per cycle the way contreact's ``cycle`` policy does:
            an interrupt after ``reflect``, one ``invoke`` per cycle, ``durability="exit"``
            (``durability`` is then ignored).
        bookkeeping: Also keep the records any exactly-once design needs, in
            their cheapest form (`FloorBook`): each model call, tool call and cycle close
            journaled with its events in one transaction on a raw DBAPI connection, and
            the events appended to the JSONL log. The floor of contreact's bookkeeping.

    Returns:
        Wall and CPU clock readings at the end of each cycle.
    """
    from langchain_core.messages import HumanMessage, RemoveMessage, SystemMessage, ToolMessage
    from langchain_ollama import ChatOllama
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    from contreact.checkpoints.saver import open_saver
    from contreact.config.sections import DEFAULT_MODEL_OPTIONS
    from contreact.nodes.prompts import REFLECTIONS_HEADING, SYSTEM_PROMPT
    from contreact.tools.registry import TOOL_SCHEMAS

    llm = ChatOllama(
        model=MODEL, base_url=host, keep_alive="5m", client_kwargs={"timeout": 60}
    ).bind_tools(TOOL_SCHEMAS)
    options = dict(DEFAULT_MODEL_OPTIONS)
    memory: dict[str, str] = {}
    notes: list[str] = []
    ends: list[Mark] = []

    book = FloorBook(where) if bookkeeping else None

    def assemble(state: State) -> dict[str, Any]:
        if state["messages"]:
            return {}
        opening = f"Cycle {state['cycle']} begins."
        if book is not None:
            book.record(
                None,
                [
                    (
                        f"c{state['cycle']}:start",
                        state["cycle"],
                        "CYCLE_START",
                        {"opening": opening, "notes": len(notes)},
                    )
                ],
            )
        return {"messages": [HumanMessage(opening)]}

    def invoke(state: State) -> dict[str, Any]:
        system = SYSTEM_PROMPT
        if notes:
            system += "\n\n" + "\n\n".join([REFLECTIONS_HEADING, *notes])
        reply = llm.invoke([SystemMessage(system), *state["messages"]], options=options)
        if book is not None:
            key = f"c{state['cycle']}:s{len(state['messages']) // 2}:llm"
            result = {"content": reply.content, "tool_calls": reply.tool_calls}
            book.record(
                (key, state["cycle"], result),
                [
                    (
                        key,
                        state["cycle"],
                        "LLM_INVOCATION",
                        {"messages": [m.content for m in state["messages"][-2:]], **result},
                    )
                ],
            )
        return {"messages": [reply]}

    def parse(state: State) -> dict[str, Any]:
        return {"outcome": "calls" if state["messages"][-1].tool_calls else "final"}  # type: ignore[union-attr]

    def dispatch(state: State) -> dict[str, Any]:
        replies = []
        for call in state["messages"][-1].tool_calls:  # type: ignore[union-attr]
            args = call["args"]
            if call["name"] == "write":
                memory[args["key"]] = args["value"]
                output = f"Stored '{args['key']}'."
            else:
                output = memory.get(args.get("key", ""), "Error: no such key.")
            replies.append(ToolMessage(output, tool_call_id=call["id"] or "x"))
            if book is not None:
                key = f"c{state['cycle']}:s{(len(state['messages']) - 1) // 2}:t{len(replies) - 1}"
                result = {"output": output}
                book.record(
                    (key, state["cycle"], result),
                    [
                        (
                            key,
                            state["cycle"],
                            "TOOL_CALL",
                            {"name": call["name"], "args": args, **result},
                        )
                    ],
                    (args["key"], args["value"]) if call["name"] == "write" else None,
                )
        return {"messages": replies}

    def reflect(state: State) -> dict[str, Any]:
        if book is not None:
            key = f"c{state['cycle']}:end"
            text = str(state["messages"][-1].content)
            book.record(
                (key, state["cycle"], {"reflection": text}),
                [
                    (f"c{state['cycle']}:similarity", state["cycle"], "SIMILARITY", {"max": 0.0}),
                    (key, state["cycle"], "CYCLE_END", {"reflection": text, "steps": 3}),
                ],
            )
        notes.append(f"Cycle {state['cycle']}: {state['messages'][-1].content}")
        ends.append(mark())
        if on_cycle is not None:
            on_cycle(state["cycle"])
        if state["cycle"] >= cycles:
            return {"outcome": "end"}
        return {
            "cycle": state["cycle"] + 1,
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)],
            "outcome": "",
        }

    def after_parse(state: State) -> Literal["dispatch", "reflect"]:
        return "dispatch" if state["outcome"] == "calls" else "reflect"

    def after_reflect(state: State) -> Literal["assemble", "__end__"]:
        return "__end__" if state["outcome"] == "end" else "assemble"

    builder = StateGraph(State)
    for name, node in [
        ("assemble", assemble),
        ("invoke", invoke),
        ("parse", parse),
        ("dispatch", dispatch),
        ("reflect", reflect),
    ]:
        builder.add_node(name, node)
    builder.add_edge(START, "assemble")
    builder.add_edge("assemble", "invoke")
    builder.add_edge("invoke", "parse")
    builder.add_conditional_edges("parse", after_parse)
    builder.add_edge("dispatch", "assemble")
    builder.add_conditional_edges("reflect", after_reflect)
    config: Any = {
        "configurable": {"thread_id": str(uuid.uuid4())},
        "recursion_limit": 20 * cycles + 10,
    }
    start = {"messages": [], "cycle": 1, "outcome": ""}
    initial: Any = start
    try:
        if not saver:
            builder.compile().invoke(initial, config)
            return ends
        with open_saver(where.storage()) as checkpointer:
            if not per_cycle:
                graph = builder.compile(checkpointer=checkpointer)
                graph.invoke(initial, config, durability=durability)
                return ends
            graph = builder.compile(checkpointer=checkpointer, interrupt_after=["reflect"])
            for _ in range(cycles):
                graph.invoke(initial, config, durability="exit")
                initial = None
        return ends
    finally:
        if book is not None:
            book.close()


class FloorBook:
    """The cheapest form of the records an exactly-once design needs (docs/event-log.md).

    One transaction per side effect, holding the effect's journal row, its events and (for
    a memory write) the memory row, in contreact's own tables (so the same indexes); then
    one JSONL append of those events through a file kept open. No look-up before an effect
    (the recorded keys can be cached in memory, as contreact does), no SQLAlchemy, no event
    objects. On SQLite the statements run on a raw `sqlite3` connection and commit; on
    PostgreSQL each transaction is one statement (the rows inserted by a writable CTE) on
    an autocommit connection, one round trip, since a round trip, not the statement, is
    what costs there. What contreact does beyond this is its own design's cost.
    """

    def __init__(self, where: BenchStorage) -> None:
        from contreact.checkpoints.engines import engine_for

        engine = engine_for(where.storage())
        self.sqlite = engine.dialect.name == "sqlite"
        self.conn = engine.raw_connection()
        if not self.sqlite:
            self.conn.dbapi_connection.autocommit = True  # type: ignore[union-attr]
        self.run_id = f"floor-{uuid.uuid4().hex[:8]}"
        logs = where.storage().logs_dir
        logs.mkdir(parents=True, exist_ok=True)
        self.log = (logs / f"{self.run_id}.jsonl").open("a", encoding="utf-8")

    def record(
        self,
        effect: tuple[str, int, Any] | None,
        batch: list[tuple[str, int, str, dict[str, Any]]],
        memory: tuple[str, str] | None = None,
    ) -> None:
        """Commit `effect`'s journal row (key, cycle, result), `batch`'s events and `memory`."""
        import json

        from contreact.checkpoints.event_schema import utc_now

        mark = "?" if self.sqlite else "%s"
        parts: list[tuple[str, tuple[Any, ...]]] = []
        if memory is not None:
            parts.append(
                (
                    "INSERT INTO contreact_memories (run_id, key, value) VALUES ({0}, {0}, {0})"
                    " ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value",
                    (self.run_id, *memory),
                )
            )
        if effect is not None:
            key, cycle, result = effect
            parts.append(
                (
                    "INSERT INTO contreact_journal (run_id, key, cycle, result)"
                    " VALUES ({0}, {0}, {0}, {0}) ON CONFLICT DO NOTHING",
                    (self.run_id, key, cycle, json.dumps(result)),
                )
            )
        rows = [
            (self.run_id, key, cycle, event_type, utc_now(), json.dumps(payload))
            for key, cycle, event_type, payload in batch
        ]
        parts.append(
            (
                "INSERT INTO contreact_events (run_id, key, cycle, event_type, timestamp, payload)"
                " VALUES "
                + ", ".join(["({0}, {0}, {0}, {0}, {0}, {0})"] * len(rows))
                + " ON CONFLICT DO NOTHING",
                tuple(v for row in rows for v in row),
            )
        )
        cursor = self.conn.cursor()
        if self.sqlite:
            for sql, params in parts:
                cursor.execute(sql.format(mark), params)
            cursor.close()
            self.conn.commit()
        else:  # every insert but the last as a writable CTE: one statement, one round trip
            ctes = ", ".join(f"w{i} AS ({sql})" for i, (sql, _) in enumerate(parts[:-1]))
            sql = (f"WITH {ctes} " if ctes else "") + parts[-1][0]
            cursor.execute(sql.format(mark), tuple(v for _, params in parts for v in params))
            cursor.close()
        self.log.write(
            "".join(
                f'{{"timestamp": "{row[4]}", "run_id": "{self.run_id}", "cycle_number": '
                f'{row[2]}, "event_type": "{row[3]}", "payload": {row[5]}}}\n'
                for row in rows
            )
        )
        self.log.flush()

    def close(self) -> None:
        """Close the connection and the log."""
        if not self.sqlite:
            # Back to the pool as it came: the next borrower (a contreact run's streamed
            # read) needs transactions.
            self.conn.dbapi_connection.autocommit = False  # type: ignore[union-attr]
        self.conn.close()
        self.log.close()


def ablate(stub: StubProcess, where: BenchStorage, cycles: int, reps: int) -> None:
    """Print contreact's step time with one mechanism at a time switched off.

    Also times two references: the minimal hand-written loop, and the same graph shape
    in plain LangGraph with and without a checkpointer (the floor of any design that
    checkpoints every superstep of this graph).
    """
    from contreact.config.sections import DEFAULT_MODEL_OPTIONS

    options = dict(DEFAULT_MODEL_OPTIONS)

    def shipped(
        patch: Callable[[], AbstractContextManager[None]], **extra: Any
    ) -> Callable[[], list[Mark]]:
        def run() -> list[Mark]:
            with patch():
                return contreact_loop(stub.url, cycles, where, **extra)

        return run

    variants: list[tuple[str, Callable[[], list[Mark]]]] = [
        ("contreact as shipped", shipped(nullcontext)),
        ("  checkpointer: InMemorySaver instead of SQLite", shipped(in_memory_checkpointer)),
        ('  durability="async" instead of "sync"', shipped(lambda: durability("async"))),
        ('  durability="exit" (checkpoint only at the end)', shipped(lambda: durability("exit"))),
        ("  no JSONL mirror of events", shipped(no_jsonl)),
        ("  no event rows", shipped(no_event_rows)),
        ("  no journal look-up before side effects", shipped(no_recall)),
        ("  no fork-point check per step (lineage_of)", shipped(no_lineage_check)),
        ("  PostgreSQL pool without pre-ping", shipped(no_pre_ping)),
        ("  no similarity monitor", shipped(nullcontext, similarity={"enabled": False})),
        (
            "reference: plain LangGraph, same 5 nodes, saver, sync",
            lambda: langgraph_floor_loop(stub.url, cycles, where, True),
        ),
        (
            "reference: plain LangGraph, same 5 nodes, no saver",
            lambda: langgraph_floor_loop(stub.url, cycles, where, False),
        ),
        (
            "reference: hand-written loop (baseline)",
            lambda: baseline_loop(stub.url, cycles, options),
        ),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    cpu: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(reps):
        for name, run in variants:
            stub.reset()
            ends = run()
            calls = len(stub.requests())
            times[name].append(steady_step_s(ends, calls - calls // cycles))
            cpu[name].append(steady_step_s(ends, calls - calls // cycles, cpu=True))
    ref = "contreact as shipped"
    wall = {name: min(v) * 1000 for name, v in times.items()}
    proc = {name: min(v) * 1000 for name, v in cpu.items()}
    print_table(
        [
            "variant (monkeypatched in this process)",
            "wall ms/call",
            "saves wall ms",
            "CPU ms/call",
            "saves CPU ms",
        ],
        [
            [
                name,
                wall[name],
                wall[ref] - wall[name] if name != ref else "",
                proc[name],
                proc[ref] - proc[name] if name != ref else "",
            ]
            for name in times
        ],
        title=f"Ablation at 0 ms latency ({reps} x {cycles} cycles each; the minimum of the "
        "runs, since other load only ever adds time)",
    )


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--profile", action="store_true", help="also print where the time goes")
    p.add_argument(
        "--ablate", action="store_true", help="also time contreact with mechanisms switched off"
    )
    args = p.parse_args()
    cycles, reps = (4, 2) if args.quick else (12, 7)
    slow_cycles, slow_reps = (2, 1) if args.quick else (4, 3)
    figures: list[Figure] = []
    rows = []
    with bench_storage(args.db_url) as where:
        workdir = Path(where.data_dir).parent
        for latency, n_cycles, n_reps in ((0, cycles, reps), (100, slow_cycles, slow_reps)):
            scenario = constant_work_scenario(1000)
            with StubProcess(scenario, workdir, latency_ms=latency) as stub:
                result = measure(stub, where, n_cycles, n_reps)
                if args.profile and latency == 0:
                    profile(stub, where, 30)
                if args.ablate and latency == 0:
                    ablate(stub, where, cycles, max(reps, 9))
            base, cont = median(result["baseline"]), median(result["contreact"])
            base_cpu, cont_cpu = median(result["baseline_cpu"]), median(result["contreact_cpu"])
            rows.append(
                [
                    f"{latency} ms",
                    f"{n_reps} x {n_cycles} cycles",
                    base * 1000,
                    cont * 1000,
                    (cont - base) * 1000,
                    f"{cont / base:.2f}x",
                    f"{base_cpu * 1000:.2f} / {cont_cpu * 1000:.2f}",
                    f"{cont_cpu / base_cpu:.2f}x",
                    f"{median(result['baseline_run']):.2f} / {median(result['contreact_run']):.2f}",
                ]
            )
            figures.append(
                Figure(
                    "a" if latency == 0 else "a100",
                    f"step time ratio contreact/baseline @{latency} ms",
                    cont / base,
                    "x",
                    1.5 if latency == 0 else None,
                    note=f"{base * 1000:.2f} -> {cont * 1000:.2f} ms/step",
                )
            )
            if latency == 0:
                best = min(result["contreact"]) / min(result["baseline"])
                figures.append(
                    Figure(
                        "a-min",
                        "same, ratio of the fastest runs @0 ms",
                        best,
                        "x",
                        note="less sensitive to other load on the machine",
                    )
                )
                figures.append(
                    Figure(
                        "a-cpu",
                        "CPU time per step, contreact/baseline @0 ms",
                        cont_cpu / base_cpu,
                        "x",
                        note=f"{base_cpu * 1000:.2f} -> {cont_cpu * 1000:.2f} CPU ms/step",
                    )
                )
    print_table(
        [
            "latency",
            "runs",
            "baseline ms/step",
            "contreact ms/step",
            "overhead ms/step",
            "ratio",
            "CPU ms/step (base / contreact)",
            "CPU ratio",
            "whole run s (base / contreact)",
        ],
        rows,
        title="(a) per-step time, steady state (median of alternating runs)",
    )
    report(figures, args.json)


if __name__ == "__main__":
    main()
