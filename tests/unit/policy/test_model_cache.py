"""The converted-model cache is keyed by the GGUF's content, not its path (issue 26: each clone
stored another 517 MB copy of the embedded model)."""

from searchgrpo.policy.model import DIGESTS, _path_key, converted_folder, gguf_digest


def test_clones_of_the_same_model_share_one_converted_folder(tmp_path):
    cache = tmp_path / "cache" / "models"
    first, second, other = (tmp_path / name / "model.gguf" for name in ("clone-a", "clone-b", "other"))
    for path, content in ((first, b"GGUF same weights"), (second, b"GGUF same weights"), (other, b"GGUF other")):
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
    a, b, c = (converted_folder(p, cache, "SmolLM2") for p in (first, second, other))
    assert a == b != c and a.name.startswith("SmolLM2-") and len(a.name) == len("SmolLM2-") + 10
    assert (cache / DIGESTS).is_file()


def test_the_digest_is_read_from_the_index_once_the_file_was_hashed(tmp_path):
    cache = tmp_path / "models"
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF bytes")
    digest = gguf_digest(path, cache)
    index = (cache / DIGESTS).read_text()
    (cache / DIGESTS).write_text(index.replace(digest, "0123456789"))  # what the index says is used
    assert gguf_digest(path, cache) == "0123456789"


def test_a_folder_converted_before_digests_is_renamed_not_converted_again(tmp_path):
    cache = tmp_path / "models"
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF bytes")
    older = cache / f"SmolLM2-{_path_key(path)}"
    older.mkdir(parents=True)
    (older / "config.json").write_text("{}")
    target = converted_folder(path, cache, "SmolLM2")
    assert (target / "config.json").is_file() and not older.exists()
