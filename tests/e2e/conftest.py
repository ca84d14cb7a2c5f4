"""Every end-to-end test is `slow`, so `pytest -m "not slow"` runs what `pytest tests/unit` runs."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests collected from this folder `slow`."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)
