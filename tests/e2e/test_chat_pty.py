"""The chat REPL through a pseudo-terminal: a tasked exchange with memory, then --resume."""

from __future__ import annotations

import json
import re

from contreact.stub import ChatRequest, Reply, StubServer
from support.backends import Backend
from support.cli import Terminal, cli_in_process


class CatAgent:
    """Remembers and recalls a cat's name, through the memory tools."""

    def respond(self, req: ChatRequest) -> Reply:
        last = req.messages[-1]
        text = str(last.get("content") or "")
        if last["role"] == "tool":
            if text.startswith("Created"):
                return Reply(content="Saved: your cat is Tom.")
            return Reply(content=f"Your cat is called {text}.")
        if "remember" in text.lower():
            return Reply(
                tool_calls=[{"name": "write", "arguments": {"key": "cat", "value": "Tom"}}]
            )
        if "cat called" in text.lower():
            return Reply(tool_calls=[{"name": "read", "arguments": {"key": "cat"}}])
        return Reply(content="I am not sure.")


def test_chat_uses_memory_and_resumes(sqlite_backend: Backend) -> None:
    with StubServer(agent=CatAgent()).start() as server:
        term = Terminal(
            sqlite_backend,
            "chat",
            "--model",
            "stub-model",
            "--host",
            server.url,
            "--run-id",
            "cats",
        )
        term.expect("New chat cats")  # its id, which --resume needs
        term.expect("you> ")
        term.send("Please remember that my cat is called Tom")
        term.expect("Saved: your cat is Tom.")
        term.expect("you> ")
        term.send("exit")
        # The hint names the storage the chat is in (this test's --data-dir): it runs as printed.
        where = re.escape(str(sqlite_backend.data_dir))
        term.expect(rf"bye: continue with `contreact chat --resume cats --storage {where}`")
        assert term.close() == 0

        again = Terminal(sqlite_backend, "chat", "--resume", "cats", "--host", server.url)
        again.expect("Continuing chat cats")
        again.expect("you> ")
        again.send("What is my cat called?")
        again.expect("Your cat is called Tom.")
        again.expect("you> ")
        os_ctrl_d = "\x04"
        again.send(os_ctrl_d)
        again.expect("bye")
        assert again.close() == 0
        second_turn = server.requests()[-2]["body"]

    system = second_turn["messages"][0]["content"]
    assert "The user said: Please remember that my cat is called Tom" in system
    assert "You answered: Saved: your cat is Tom." in system
    assert json.loads(cli_in_process(sqlite_backend, "memory", "cats", "--json").stdout) == {
        "cat": "Tom"
    }
    shown = json.loads(cli_in_process(sqlite_backend, "show", "cats", "--json").stdout)
    assert [c["reflection"] for c in shown] == [
        "Saved: your cat is Tom.",
        "Your cat is called Tom.",
    ]
