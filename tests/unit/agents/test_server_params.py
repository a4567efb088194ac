"""What the embedded server asks llama.cpp for, read from the parameters it hands to xllamacpp
(a stand-in server records them and refuses to start, so no model is loaded)."""

import pytest

from searchgrpo.agents.server import SERVER_POLL, EmbeddedServer
from searchgrpo.errors import UserError


@pytest.fixture
def handed(monkeypatch):
    import xllamacpp

    seen = []

    def refuse(params):
        seen.append(params)
        raise RuntimeError("stand-in server")

    monkeypatch.setattr(xllamacpp, "Server", refuse)
    return seen


@pytest.mark.parametrize("poll", [None, 50])
def test_the_server_spins_only_as_asked(handed, tmp_path, poll):
    """llama.cpp's threads would spin for work at its default (50) and take the cores of busy
    neighbours; ours asks for SERVER_POLL (0) unless told otherwise."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")
    server = EmbeddedServer(gguf, parallel=1, threads=2) if poll is None else EmbeddedServer(gguf, poll=poll)
    with pytest.raises(UserError, match="did not start"):
        server.start()
    want = SERVER_POLL if poll is None else poll
    assert SERVER_POLL == 0
    assert handed[0].cpuparams.poll == want and handed[0].cpuparams_batch.poll == want
