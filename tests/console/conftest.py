"""The console tests' fixtures (helpers, and the fixtures themselves: tests/helpers/console.py)."""

import pytest

from tests.helpers.console import cfg, quiet  # noqa: F401  (cfg: the tiny config in a fresh working folder)


@pytest.fixture
def snap_compare(snap_compare):
    """pytest-textual-snapshot's `snap_compare`, taking its picture only once the screen is finished
    (`quiet`): its own pauses judge the app idle by CPU time, which a busy machine fools."""

    def compare(app, *args, run_before=None, **kwargs):
        async def then_quiet(pilot):
            if run_before is not None:
                result = run_before(pilot)
                if result is not None:
                    await result
            await quiet(pilot)

        return snap_compare(app, *args, run_before=then_quiet, **kwargs)

    return compare
