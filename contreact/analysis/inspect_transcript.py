"""A run's transcript as Inspect AI chat messages, rebuilt from its event log.

The event log is the one place every turn of every cycle is kept (the checkpoint holds
only the cycle in flight): each LLM_INVOCATION logs what its prompt added and the answer,
each TOOL_CALL what a call ran with and returned, CYCLE_START the opening turn and
CYCLE_END the reflection. Read in order they give the run as the agent lived it:

- the system prompt as cycle 1 sent it (later cycles send it again with the earlier
  reflections, which are already in the transcript as those cycles' answers);
- each cycle's opening turn, and any turn contreact added (a corrective turn, a nudge);
- every model answer, its thinking kept as reasoning, with the tool calls that ran (or,
  when none ran, the calls the model made);
- every tool result, a failed one as an error;
- the answer that closed a cycle, marked as that cycle's reflection.

Words of the operator are marked `source="operator"`, as Inspect marks operator input:
the reply to the agent's message (the tool result it got, kept a tool result so the call
and its answer stay paired) and an intervention's message to the agent (sent within the
cycle's opening turn, split off here as a user message of its own). Every message carries
its `cycle` (and `step`) in its metadata.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contreact.nodes.prompts import OPERATOR_NOTE
from contreact.tools.registry import OPERATOR_TOOL

if TYPE_CHECKING:
    from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageTool


@dataclass
class Transcript:
    """What a run's event log holds, gathered for its Inspect sample."""

    run_id: str
    model: str
    system: str | None = None
    messages: list[ChatMessage] = field(default_factory=list)
    start: dict[str, Any] = field(default_factory=dict)
    """The run's (or branch's) first RUN_START payload."""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    """Every provenance record, in order: the start's, then each resume's or extension's."""
    first_input: str = ""
    """The opening turn of the first cycle (the sample's input)."""
    reflections: dict[int, str] = field(default_factory=dict)
    """Each finished cycle's reflection, as recorded."""
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    ended: bool = False
    """A RUN_END was recorded."""
    _answers: dict[tuple[int, int], ChatMessageAssistant] = field(default_factory=dict)
    _ran: set[tuple[int, int]] = field(default_factory=set)
    _results: dict[tuple[int, int], list[ChatMessageTool]] = field(default_factory=dict)
    _last_answer: dict[int, ChatMessageAssistant] = field(default_factory=dict)
    _openings: dict[int, str] = field(default_factory=dict)
    _opened: set[int] = field(default_factory=set)
    _notes: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    _similarity: dict[int, dict[str, Any]] = field(default_factory=dict)

    def read(self, lines: Iterable[dict[str, Any]]) -> Transcript:
        """Add the run's events (JSONL-shaped, in log order); returns itself."""
        for line in lines:
            self.add(line)
        self._open_pending()
        return self

    def add(self, line: dict[str, Any]) -> None:
        """Add one event."""
        kind, cycle, payload = line["event_type"], int(line["cycle_number"]), line["payload"]
        self.first_timestamp = self.first_timestamp or line.get("timestamp")
        self.last_timestamp = line.get("timestamp") or self.last_timestamp
        if kind == "RUN_START" and not self.start:
            self.start = payload
            if isinstance(payload.get("provenance"), dict):
                self.provenance.append({"occasion": "start", **payload["provenance"]})
        elif kind == "PROVENANCE" and isinstance(payload.get("provenance"), dict):
            self.provenance.append({"occasion": payload.get("occasion"), **payload["provenance"]})
        elif kind == "CYCLE_START":
            self._open_pending(before=cycle)
            self._openings[cycle] = str(payload.get("opening") or "")
        elif kind == "INTERVENTION" and payload.get("kind") == "operator_message":
            message = str((payload.get("detail") or {}).get("message") or "")
            self._notes.setdefault(cycle, []).append((int(payload.get("index") or 0), message))
        elif kind == "LLM_INVOCATION":
            self._invocation(cycle, payload)
        elif kind == "TOOL_CALL":
            self._tool_call(cycle, payload)
        elif kind == "OPERATOR_MESSAGE":
            self._operator(cycle, payload)
        elif kind == "SIMILARITY":
            self._similarity[cycle] = payload
        elif kind == "CYCLE_END":
            self._cycle_end(cycle, payload)
        elif kind == "RUN_END":
            self.ended = True

    def all_messages(self) -> list[ChatMessage]:
        """The system prompt (when one was logged whole) and the turns, in order."""
        from inspect_ai.model import ChatMessageSystem

        if self.system is None:
            return list(self.messages)
        return [ChatMessageSystem(content=self.system, source="input"), *self.messages]

    def _open_pending(self, before: int | None = None) -> None:
        """Emit the opening turns recorded but not yet emitted (of cycles before `before`)."""
        for cycle in sorted(self._openings):
            if cycle not in self._opened and (before is None or cycle < before):
                self._open(cycle)

    def _open(self, cycle: int) -> None:
        """The cycle's opening turn, its operator messages split off as the operator's."""
        from inspect_ai.model import ChatMessageUser

        self._opened.add(cycle)
        text = self._openings.get(cycle, "")
        notes = []
        for index, message in self._notes.get(cycle, []):
            note = OPERATOR_NOTE.format(message=message)
            notes.append((index, note))
        suffix = "".join("\n\n" + note for _, note in notes)
        if notes and text.endswith(suffix):
            text = text[: len(text) - len(suffix)]
        else:
            notes = []
        self.first_input = self.first_input or text
        self.messages.append(
            ChatMessageUser(
                content=text, source="input", metadata={"cycle": cycle, "opening": True}
            )
        )
        for index, note in notes:
            self.messages.append(
                ChatMessageUser(
                    content=note,
                    source="operator",
                    metadata={"cycle": cycle, "intervention": index},
                )
            )

    def _invocation(self, cycle: int, payload: dict[str, Any]) -> None:
        from inspect_ai.model import (
            ChatMessageAssistant,
            ChatMessageUser,
            ContentReasoning,
            ContentText,
        )

        step = int(payload.get("step") or 0)
        if step == 0 and cycle in self._openings and cycle not in self._opened:
            self._open(cycle)
        for logged in payload.get("new_messages") or []:
            role, content = logged.get("role"), logged.get("content")
            if role == "system":
                if self.system is None and isinstance(content, str):
                    self.system = content
            elif role == "user" and isinstance(content, str):
                if step == 0 and cycle not in self._opened:
                    self._openings[cycle] = content
                    self._open(cycle)
                elif step > 0:
                    where = {"cycle": cycle, "step": step}
                    self.messages.append(ChatMessageUser(content=content, metadata=where))
        response = payload.get("response") or {}
        text, thinking = str(response.get("content") or ""), str(response.get("thinking") or "")
        options = payload.get("options") or {}
        answer = ChatMessageAssistant(
            content=[ContentReasoning(reasoning=thinking), ContentText(text=text)]
            if thinking
            else text,
            source="generate",
            model=str(options.get("model") or self.model),
            tool_calls=_calls(cycle, step, response.get("tool_calls") or []) or None,
            metadata={
                "cycle": cycle,
                "step": step,
                "tokens_in": payload.get("tokens_in"),
                "tokens_out": payload.get("tokens_out"),
                "duration_s": payload.get("duration_s"),
            },
        )
        self.messages.append(answer)
        self._answers[(cycle, step)] = answer
        self._last_answer[cycle] = answer

    def _tool_call(self, cycle: int, payload: dict[str, Any]) -> None:
        from inspect_ai.model import ChatMessageTool
        from inspect_ai.tool import ToolCall, ToolCallError

        step = int(payload.get("step") or 0)
        call_id, name = str(payload.get("call_id") or ""), str(payload.get("tool_name") or "")
        output = str(payload.get("output") or "")
        answer = self._answers.get((cycle, step))
        if answer is not None:
            if (cycle, step) not in self._ran:
                # The calls that ran are the answer's calls (text-format calls are read from
                # its content, so the response names none of them).
                self._ran.add((cycle, step))
                answer.tool_calls = []
            parameters = payload.get("parameters")
            arguments = parameters if isinstance(parameters, dict) else {"value": parameters}
            assert answer.tool_calls is not None
            answer.tool_calls.append(ToolCall(id=call_id, function=name, arguments=arguments))
        result = ChatMessageTool(
            content=output,
            tool_call_id=call_id,
            function=name,
            error=ToolCallError("unknown", output) if payload.get("error") else None,
            metadata={
                "cycle": cycle,
                "step": step,
                "refused": bool(payload.get("refused")),
                "truncated": bool(payload.get("truncated")),
                "duration_s": payload.get("duration_s"),
            },
        )
        self.messages.append(result)
        self._results.setdefault((cycle, step), []).append(result)

    def _operator(self, cycle: int, payload: dict[str, Any]) -> None:
        from inspect_ai.model import ChatMessageUser

        step = int(payload.get("step") or 0)
        exchange = {k: payload.get(k) for k in ("message", "reply", "policy", "wait_s")}
        replies = [r for r in self._results.get((cycle, step), []) if r.function == OPERATOR_TOOL]
        if replies:
            reply = replies[-1]
            reply.source = "operator"
            reply.metadata = {**(reply.metadata or {}), "operator": exchange}
            return
        # No tool result carries it (a record from before results were logged): the reply
        # still reaches the transcript as the operator's.
        self.messages.append(
            ChatMessageUser(
                content=str(payload.get("reply") or ""),
                source="operator",
                metadata={"cycle": cycle, "step": step, "operator": exchange},
            )
        )

    def _cycle_end(self, cycle: int, payload: dict[str, Any]) -> None:
        from inspect_ai.model import ChatMessageAssistant

        self._open_pending(before=cycle + 1)
        reflection = str(payload.get("final_reflection") or "")
        self.reflections[cycle] = reflection
        answer = self._last_answer.get(cycle)
        if answer is None:
            # A cycle inherited without its calls (a branch of a run logged before calls
            # were): its reflection alone.
            answer = ChatMessageAssistant(content=reflection, model=self.model, metadata={})
            self.messages.append(answer)
        marks: dict[str, Any] = {"cycle": cycle, "reflection": True}
        if answer.text.strip() != reflection.strip():
            marks["reflection_text"] = reflection
        similarity = self._similarity.get(cycle)
        if similarity is not None:
            marks["similarity"] = {k: similarity.get(k) for k in ("maximum", "level", "method")}
        answer.metadata = {**(answer.metadata or {}), **marks}


def _calls(cycle: int, step: int, calls: list[Any]) -> list[Any]:
    """The tool calls an answer made, with the ids contreact gives them (`c1-s0-t0`)."""
    from inspect_ai.tool import ToolCall

    made = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        args = call.get("args")
        made.append(
            ToolCall(
                id=f"c{cycle}-s{step}-t{i}",
                function=str(call.get("name") or ""),
                arguments=args if isinstance(args, dict) else {"value": args},
            )
        )
    return made
