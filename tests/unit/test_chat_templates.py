"""The real backend renders prompts exactly as Ollama does (its own template test data).

Expected strings are Ollama's test fixtures, github.com/ollama/ollama
`template/testdata/<template>/<case>` (chatml at d849a8b, gemma3-instruct at 56080ca,
71e66c7 and fe9298a), rendered from the messages of Ollama's `template_test.go`.
"""

from __future__ import annotations

from typing import Any

import pytest

from contreact.stub.chat_templates import collate, render

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER_1 = {"role": "user", "content": "Hello, how are you?"}
ASSISTANT = {"role": "assistant", "content": "I'm doing great. How can I help you today?"}
USER_2 = {"role": "user", "content": "I'd like to show off how chat templating works!"}

OLLAMA_TESTDATA: list[tuple[str, str, list[dict[str, Any]], str]] = [
    (
        "gemma3",
        "user",
        [USER_1],
        "<start_of_turn>user\nHello, how are you?<end_of_turn>\n<start_of_turn>model\n\n",
    ),
    (
        "gemma3",
        "user-assistant-user",
        [USER_1, ASSISTANT, USER_2],
        "<start_of_turn>user\nHello, how are you?<end_of_turn>\n<start_of_turn>model\n"
        "I'm doing great. How can I help you today?<end_of_turn>\n<start_of_turn>user\n"
        "I'd like to show off how chat templating works!<end_of_turn>\n<start_of_turn>model\n\n",
    ),
    (
        "gemma3",
        "system-user-assistant-user",
        [SYSTEM, USER_1, ASSISTANT, USER_2],
        "<start_of_turn>user\nYou are a helpful assistant.\n\nHello, how are you?<end_of_turn>\n"
        "<start_of_turn>model\nI'm doing great. How can I help you today?<end_of_turn>\n"
        "<start_of_turn>user\nI'd like to show off how chat templating works!<end_of_turn>\n"
        "<start_of_turn>model\n\n",
    ),
    (
        "chatml",
        "system-user-assistant-user",
        [SYSTEM, USER_1, ASSISTANT, USER_2],
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "Hello, how are you?<|im_end|>\n<|im_start|>assistant\nI'm doing great. How can I help "
        "you today?<|im_end|>\n<|im_start|>user\nI'd like to show off how chat templating "
        "works!<|im_end|>\n<|im_start|>assistant\n",
    ),
]


@pytest.mark.parametrize(
    ("family", "case", "messages", "expected"),
    OLLAMA_TESTDATA,
    ids=[f"{f}-{c}" for f, c, _, _ in OLLAMA_TESTDATA],
)
def test_prompts_match_ollamas_template_testdata(
    family: Any, case: str, messages: list[dict[str, Any]], expected: str
) -> None:
    assert render(family, messages) == expected


def test_gemma3_drops_tool_turns_and_loses_the_system_text_without_a_first_user_turn() -> None:
    tool = {"role": "tool", "content": "Created memory 'k'."}
    with_tool = render("gemma3", [SYSTEM, USER_1, ASSISTANT, tool])
    assert "Created memory" not in with_tool
    assert with_tool.endswith("<end_of_turn>\n<start_of_turn>model\n\n")
    # History truncated to start at an assistant turn: index 1 is not a user turn.
    truncated = render("gemma3", [SYSTEM, ASSISTANT, USER_2])
    assert "helpful assistant." not in truncated


def test_chatml_keeps_tool_turns_and_collate_merges_same_role_runs() -> None:
    tool = {"role": "tool", "content": "ok"}
    assert "<|im_start|>tool\nok<|im_end|>\n<|im_start|>tool\nok<|im_end|>" in render(
        "chatml", [USER_1, ASSISTANT, tool, tool]
    )
    system, merged = collate([SYSTEM, SYSTEM, USER_1, USER_2])
    assert system == "You are a helpful assistant.\n\nYou are a helpful assistant."
    assert [m["role"] for m in merged] == ["system", "user"]
    assert merged[1]["content"] == USER_1["content"] + "\n\n" + USER_2["content"]
