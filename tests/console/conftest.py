"""The console tests' fixture (helpers, and the fixture itself: tests/helpers/console.py)."""

from tests.helpers.console import cfg  # noqa: F401  (the tiny config in a fresh working folder)
