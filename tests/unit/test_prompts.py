"""The system prompt is pinned and documented verbatim; the sections around it are deterministic."""

from __future__ import annotations

import hashlib
import re

from langchain_core.messages import HumanMessage, SystemMessage

from contreact.checkpoints.cycles import Note
from contreact.nodes.prompts import SYSTEM_PROMPT, build_prompt, opening_turn, system_text
from support.paths import ROOT

RESEARCH_DOC = ROOT / "docs" / "research.md"


def test_system_prompt_is_pinned() -> None:
    digest = hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest()
    assert digest == "3d2107eab35e44096d66da9ffc5d20cb5e612e39c30aadb69b95fc51f36a114e"


def test_system_prompt_is_the_documented_one() -> None:
    """docs/research.md quotes the prompt a run sends, so a reader sees exactly that text."""
    doc = RESEARCH_DOC.read_text(encoding="utf-8")
    match = re.search(r"## The system prompt\n.*?\n```text\n(.*?)\n```", doc, re.S)
    assert match is not None
    assert match.group(1) == SYSTEM_PROMPT


def test_system_text_sections() -> None:
    assert system_text([]) == SYSTEM_PROMPT
    text = system_text([Note(1, "", "one"), Note(2, "", " ")], advisory="Be different.", omitted=3)
    assert text.startswith(SYSTEM_PROMPT + "\n\n## Your notes from previous cycles")
    assert "3 older notes are left out" in text
    assert text.index("Cycle 1: one") < text.index("Cycle 2: (empty)") < text.index("Be different.")


def test_build_prompt_shows_reflections_from_the_first_kept_cycle() -> None:
    notes = [Note(1, "o", "a"), Note(2, "o", "b"), Note(3, "o", "c")]
    prompt = build_prompt(notes, [HumanMessage("hi")], first_cycle=2)
    assert isinstance(prompt[0], SystemMessage) and isinstance(prompt[1], HumanMessage)
    system = str(prompt[0].content)
    assert "Cycle 1: a" not in system and "Cycle 2: b" in system and "1 older notes" in system
    assert build_prompt([], []) == build_prompt([], []), "pure: same input, same prompt"


def test_opening_turn() -> None:
    assert opening_turn("Cycle {cycle} begins.", 3) == "Cycle 3 begins."
    assert opening_turn("No placeholder {oops}", 3) == "No placeholder {oops}"
    assert opening_turn("Cycle {cycle} begins.", 1, task="Sort this") == "Sort this"
    assert opening_turn("Cycle {cycle} begins.", 2, task="Sort this") == "Cycle 2 begins."


def test_tasked_runs_see_the_conversation() -> None:
    text = system_text([Note(1, "Remember my cat Tom", "Saved.")], task="Remember my cat Tom")
    assert not text.startswith(SYSTEM_PROMPT)
    assert "The user said: Remember my cat Tom\nYou answered: Saved." in text
