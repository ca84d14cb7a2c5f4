"""The optional extras an integrations test needs: skipped without them, failed in their tier.

The `integrations` tier (`.ci/run`, with `CI=true` and `CONTREACT_INTEGRATIONS=1`) installs
the `inspect` and `otel` extras and Arize Phoenix; there a missing one is a failure. Elsewhere
(the main suite, a developer's venv without the extras) the tests that need them skip.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from support.ci import IN_CI

REQUIRED = IN_CI and os.environ.get("CONTREACT_INTEGRATIONS") == "1"
"""In CI's integrations tier: every extra must be there."""


def needs(module: str, extra: str) -> None:
    """Skip the calling test module (fail it in the integrations tier) without `module`."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # a dotted name whose parent package is missing
        found = False
    if found:
        return
    why = f"needs the `{extra}` extra: pip install -e '.[dev,{extra}]'"
    if REQUIRED:
        pytest.fail(f"CONTREACT_INTEGRATIONS=1 in CI but {module} is missing: {why}")
    pytest.skip(why, allow_module_level=True)
