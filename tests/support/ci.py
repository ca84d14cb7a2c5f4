"""Whether the tests run in CI, where a missing service or tool fails a test instead of skipping."""

from __future__ import annotations

import os

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
