"""The `auto` operator policy: replies from a list in order, then the fixed reply (issue 30).

Handing out a list needs the count of the run's earlier messages; the count is asked for
only then, and only up to the list's length, so a long run that writes to the operator
does not read all its events at every message.
"""

from __future__ import annotations

import pytest

from contreact.config.sections import NO_REPLY_TEXT, OperatorSettings
from contreact.engine.operator_policy import answer


class Count:
    """The runner's count of earlier messages, recording what was asked."""

    def __init__(self, earlier: int) -> None:
        self.earlier = earlier
        self.asked: list[int] = []

    def __call__(self, up_to: int) -> int:
        self.asked.append(up_to)
        return min(self.earlier, up_to)


def reply(settings: OperatorSettings, count: Count) -> str:
    answered = answer(settings, "hello?", None, count)
    assert answered is not None and answered["policy"] == "auto"
    return answered["reply"]


@pytest.mark.parametrize("earlier", [0, 1, 2, 5_000])
def test_a_list_is_handed_out_in_order_then_the_fixed_reply(earlier: int) -> None:
    settings = OperatorSettings(mode="auto", replies=["first", "second"], reply="fixed")
    count = Count(earlier)
    assert reply(settings, count) == (["first", "second"] + ["fixed"] * 5_000)[earlier]
    assert count.asked == [2]  # counted up to the list's length, not the run's messages


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (OperatorSettings(mode="auto", reply="fixed"), "fixed"),
        (OperatorSettings(mode="auto", replies=["a"], no_reply=True), NO_REPLY_TEXT),
    ],
    ids=["one reply", "no reply"],
)
def test_without_a_list_to_hand_out_nothing_is_counted(
    settings: OperatorSettings, expected: str
) -> None:
    count = Count(7)
    assert reply(settings, count) == expected
    assert count.asked == []
