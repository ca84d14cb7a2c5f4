"""Helpers the tests share: storage backends, the CLI driver, run outcomes, stubs, SQL tracing.

Test modules import these (`from support.cli import cli`); `tests/conftest.py` only turns
some of them into fixtures. `tests` is on the import path (`pythonpath` in pyproject).
"""
