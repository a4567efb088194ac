"""The fault suite is integration work (real CLIs, servers, signals and disks): the full tier only."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability/" in item.nodeid:
            item.add_marker(pytest.mark.slow)
