"""The text roundtrip tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/policy/test_text_roundtrip.py`."""

from searchgrpo.policy.model import resolve_base
from tests.helpers.tiny import tiny_config
from tests.unit.policy.test_text_roundtrip import TEXT


def test_byte_level_tokens_of_one_character_decode_together(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_base(tiny_config(tmp_path)).path))
    ids = tokenizer(TEXT)["input_ids"]
    pieces = [tokenizer.decode([i]) for i in ids]
    assert "".join(pieces) != TEXT  # some characters span tokens: decoding one at a time breaks them
    assert tokenizer.decode(ids, skip_special_tokens=True) == TEXT  # generate() decodes the whole row
