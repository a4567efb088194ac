"""Text keeps its characters from the tokenizer to the console (issue 26's "MarienfÃ¨re").

That clue was written by the model itself: "MarienfÃ¨re" is the tokens 'Ãĥ', 'Â', '¨' of
SmolLM2's vocabulary (UTF-8 read as cp1252, learned from web text), where "Marienfère" would be
'Ã¨re'. Nothing on the way decodes bytes as latin-1 or token by token: these tests pin every step
(byte-level decoding of a multi-byte character split across tokens, clue parsing, events.jsonl and
the console's reader), so a mojibake on screen is always the model's own.
"""

import json

from searchgrpo.env.prompts import parse_clues
from searchgrpo.events import GroupScored, SampleView
from searchgrpo.sinks import JsonlSink
from tui.sources import JsonlFollower

TEXT = "Marienfère Zürich – Ōsaka"


def test_clues_events_and_the_console_reader_keep_the_characters(tmp_path):
    (clue,) = parse_clues(f"1. {TEXT}", 5).clues
    assert clue == TEXT
    sample = SampleView(0, TEXT, [clue], 0.0, 0.0, {}, {}, [])
    event = GroupScored(1, 0, "q1/r001", f"Where is {TEXT}?", 1, [sample], 0.0, 0.0, True)
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    sink(event)
    sink.close()
    assert TEXT in path.read_text(encoding="utf-8")
    assert json.loads(path.read_bytes())["samples"][0]["clues"] == [TEXT]
    (read,) = JsonlFollower(path).read()
    assert read == event and read.samples[0].clues == [TEXT]
