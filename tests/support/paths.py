"""Where the repository and the tests' data files are."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root folder."""

DATA = ROOT / "tests" / "data"
"""Files the tests read: corpora, captures, stub scenarios."""

SCENARIOS = DATA / "scenarios"
"""Stub scenario files only tests use (the product bundles `contreact/stub/scripts/`)."""
