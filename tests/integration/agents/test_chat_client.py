"""The chat client tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/agents/test_chat_client.py`."""

import time

import pytest

from searchgrpo.agents.endpoint import open_endpoint
from searchgrpo.errors import UserError
from tests.helpers.tiny import tiny_config
from tests.unit.agents.test_chat_client import closed_port


def test_server_down_at_start_fails_in_one_line_within_seconds(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    cfg = tiny_config(tmp_path, "checker.backend=llm", f"checker.server={url}")
    start = time.monotonic()
    with pytest.raises(UserError) as info:
        open_endpoint(cfg.checker)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "\n" not in message and url in message and "unreachable" in message
