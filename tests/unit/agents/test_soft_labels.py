"""Soft labels: the expected reward under the checker's label probabilities (by hand), the `llm`
checker's probabilities from a local server's logprobs, and where they travel (cache, events,
console)."""

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from searchgrpo.agents.chat_client import ChatClient
from searchgrpo.agents.checker import CheckRequest
from searchgrpo.agents.label_logprobs import label_probs
from searchgrpo.agents.llm_checker import LLMChecker
from searchgrpo.agents.verdict_cache import PREVIOUS_TABLE, CachedVerdict, CacheKey, VerdictCache
from searchgrpo.config import ConfigError, load_config
from searchgrpo.data.labels import Label
from searchgrpo.env.prompts import ParsedClues
from searchgrpo.env.reward import RewardCalculator, component_counts
from searchgrpo.env.search_round import StepResult
from searchgrpo.events import DocView, SampleView, event_from_dict, event_to_dict
from searchgrpo.train.rollouts import ScoredGroup

COUNTS = dict(duplicate_clues=0, unparsable=False, clues_written=2, min_clues=2, max_clues=4)


def test_a_document_pays_the_expected_reward_under_its_probabilities():
    calc = RewardCalculator.from_weights({"new_important": 1.0, "new_relevant": 0.2, "retrieved_doc": -0.02})
    counts = component_counts(
        retrieved=[(Label.IMPORTANT, False), (Label.IRRELEVANT, True), (Label.RELEVANT, False)],
        label_probs=[(0.55, 0.40, 0.05), (0.9, 0.1, 0.0), None],
        **COUNTS,
    )
    # The first document counts 0.55 / 0.40 / 0.05; the second was already discovered (no find
    # whatever its probabilities); the third has no probabilities and counts its label.
    assert counts["new_important"] == pytest.approx(0.55)
    assert counts["new_relevant"] == pytest.approx(1.40)
    assert counts["irrelevant"] == pytest.approx(0.05)
    assert counts["already_discovered"] == 1 and counts["retrieved_doc"] == 3
    # 0.55 x 1.0 + 1.40 x 0.2 - 3 x 0.02 = 0.55 + 0.28 - 0.06
    assert calc.combine(counts).total == pytest.approx(0.77)
    hard = component_counts(retrieved=[(Label.IMPORTANT, False)], **COUNTS)
    assert hard["new_important"] == 1.0 and hard["new_relevant"] == 0.0
    with pytest.raises(ValueError, match="2 label probabilities for 1 documents"):
        component_counts(retrieved=[(Label.IMPORTANT, False)], label_probs=[None, None], **COUNTS)


def test_the_finds_filter_compares_expected_finds():
    calc = RewardCalculator.from_weights({"new_important": 1.0, "new_relevant": 0.2, "retrieved_doc": -0.02})

    def group(*docs_per_sample):
        results = []
        for docs in docs_per_sample:
            counts = component_counts(
                retrieved=[(Label.IMPORTANT, False)] * len(docs), label_probs=list(docs), **COUNTS
            )
            results.append(StepResult((), ParsedClues((), 0, False), (), calc.combine(counts)))
        return ScoredGroup((0, 0), None, [], [], results, zero_std=False)

    # 0.5 x 1 + 0.5 x 0.2 = 0.6 either way: the same expected finds, whatever the labels say.
    same = group([(0.5, 0.5, 0.0)], [(0.6, 0.0, 0.4)])
    assert same.same_finds and same.usefulness("finds") == 1
    differ = group([(0.9, 0.1, 0.0)], [(0.6, 0.0, 0.4)])
    assert not differ.same_finds and differ.usefulness("finds") == 0


def test_soft_labels_need_a_checker_with_probabilities():
    with pytest.raises(
        ConfigError, match=r"reward\.soft_labels .* checker\.backend = gold gives none; set checker\.backend"
    ):
        load_config(None, ["reward.soft_labels=true"])
    assert load_config(None, ["reward.soft_labels=true", "checker.backend=base"]).reward.soft_labels


# ----------------------------------------------------------------------------- logprobs


def entry(token, logprob, alternatives=()):
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alternatives]}


def reply_of(content, entries):
    return {"choices": [{"message": {"content": content}, "logprobs": {"content": entries}}]}


def test_probabilities_at_the_labels_first_token_by_hand():
    ln = math.log
    plain = reply_of(
        "IMPORTANT",
        [
            entry("IMP", ln(0.5), [("IMP", ln(0.5)), ("REL", ln(0.2)), ("IRR", ln(0.05)), ("The", ln(0.25))]),
            entry("ORTANT", ln(0.99)),
        ],
    )
    # "The" starts no label: 0.5, 0.2 and 0.05 of 0.75.
    probs, why = label_probs(plain, "IMPORTANT", Label.IMPORTANT)
    assert why == "" and probs == pytest.approx((2 / 3, 0.8 / 3, 0.2 / 3))
    # In JSON the label's token may carry the quote before it: alternatives must carry it too.
    text = '{"label": "RELEVANT"}'
    quoted = reply_of(
        text,
        [
            entry('{"label":', ln(0.9)),
            entry(' "REL', ln(0.6), [(' "IMP', ln(0.3)), (' "REL', ln(0.6)), ("REL", ln(0.1))]),
            entry('EVANT"}', ln(0.99)),
        ],
    )
    probs, _ = label_probs(quoted, text, Label.RELEVANT)
    assert probs == pytest.approx((1 / 3, 2 / 3, 0.0))
    # llama.cpp's grammar spells a label one character at a time: "I" starts IMPORTANT and IRRELEVANT.
    spelled = reply_of(
        "IRRELEVANT", [entry("I", ln(0.4), [("I", ln(0.4)), ("R", ln(0.1))])] + [entry(c, 0.0) for c in "RRELEVANT"]
    )
    probs, why = label_probs(spelled, "IRRELEVANT", Label.IRRELEVANT)
    assert probs is None and "not distinct" in why and "IMPORTANT and IRRELEVANT" in why
    assert label_probs({"choices": [{"message": {"content": "IMPORTANT"}}]}, "IMPORTANT", Label.IMPORTANT)[0] is None


class LogprobServer:
    """A local OpenAI-compatible server that answers every chat completion with the label it is
    told and logprobs for it, and records the request bodies."""

    def __init__(self, content: str, entries: list) -> None:
        self.bodies: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, data: dict) -> None:
                body = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "judge"}]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                server.bodies.append(json.loads(self.rfile.read(length)))
                self._send(
                    {
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "logprobs": {"content": entries},
                            }
                        ]
                    }
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_llm_checker_reads_probabilities_from_a_servers_logprobs(tmp_path):
    ln = math.log
    server = LogprobServer(
        "RELEVANT", [entry("REL", ln(0.7), [("REL", ln(0.7)), ("IMP", ln(0.2)), ("IRR", ln(0.1))]), entry("EVANT", 0.0)]
    )
    requests = [CheckRequest("q", "Who founded X?", ("find X",), f"d{i}", f"Doc {i}", "text") for i in range(3)]
    try:
        client = ChatClient(server.url, timeout_s=10, max_retries=0)
        assert client.health() == ["judge"]
        checker = LLMChecker(client, "judge", structured_output="none", cache=VerdictCache(tmp_path / "v.sqlite"))
        verdicts = checker.check(requests)
        assert all(v.label is Label.RELEVANT and v.probs == pytest.approx((0.2, 0.7, 0.1)) for v in verdicts)
        assert all(b["logprobs"] is True and b["top_logprobs"] >= 3 for b in server.bodies)
        checker.close()
        again = LLMChecker(client, "judge", structured_output="none", cache=VerdictCache(tmp_path / "v.sqlite"))
        cached = again.check(requests)
        assert len(server.bodies) == 3  # all from the cache, probabilities included
        assert [v.probs for v in cached] == [v.probs for v in verdicts]
        again.close()
    finally:
        server.close()


def test_a_server_whose_labels_share_a_first_token_gives_no_probabilities(tmp_path):
    server = LogprobServer("IMPORTANT", [entry("I", -0.1, [("I", -0.1)])] + [entry(c, 0.0) for c in "MPORTANT"])
    try:
        checker = LLMChecker(ChatClient(server.url, timeout_s=10, max_retries=0), "judge", structured_output="none")
        (verdict,) = checker.check([CheckRequest("q", "Q?", (), "d", "T", "text")])
        assert verdict.label is Label.IMPORTANT and verdict.probs is None
        assert "not distinct" in checker.probs_note and checker.stats()["no_probs"] == 1
        checker.close()
    finally:
        server.close()


# ----------------------------------------------------------------------------- where probabilities go


def test_the_cache_keeps_probabilities_and_still_reads_rows_without(tmp_path):
    import sqlite3

    path = tmp_path / "v.sqlite"
    old = sqlite3.connect(path)  # a cache file written before probabilities were kept
    old.execute(
        f"CREATE TABLE {PREVIOUS_TABLE} (question_key TEXT, docid TEXT, doc_key TEXT, model TEXT, "
        "prompt_version TEXT, label TEXT, reason TEXT, created REAL, "
        "PRIMARY KEY (question_key, docid, doc_key, model, prompt_version))"
    )
    old.execute(f"INSERT INTO {PREVIOUS_TABLE} VALUES ('q', 'd-old', 'k', 'm', 'v', 'RELEVANT', 'llm', 0)")
    old.commit()
    old.close()
    cache = VerdictCache(path)
    new, was = CacheKey("q", "d-new", "m", "v", "k"), CacheKey("q", "d-old", "m", "v", "k")
    cache.put_rows([(new, CachedVerdict("IMPORTANT", "base model", (0.6, 0.3, 0.1)))])
    rows = cache.get_rows([new, was, CacheKey("q", "d-none", "m", "v", "k")])
    assert rows == {
        new: CachedVerdict("IMPORTANT", "base model", (0.6, 0.3, 0.1)),
        was: CachedVerdict("RELEVANT", "llm", None),
    }
    assert cache.get_many([was]) == {was: ("RELEVANT", "llm")}
    cache.close()


def test_events_and_the_console_carry_the_probabilities():
    from rich.console import Console

    from tui.widgets.sample_detail import render_sample

    docs = [
        DocView("d1", "Krallo", "snippet", "IMPORTANT", "base model", True, 0, 0, [0.55, 0.4, 0.05]),
        DocView("d2", "Orvane", "snippet", "", "not judged", True, 0, 1),
    ]
    sample = SampleView(0, "Krallo", ["Krallo"], 0.5, 0.1, {}, {}, docs)
    back = event_from_dict(json.loads(json.dumps(event_to_dict(sample_group(sample)))))
    assert back.samples[0].docs[0].probs == [0.55, 0.4, 0.05] and back.samples[0].docs[1].probs is None
    console = Console(width=100, record=True)
    console.print(render_sample(back.samples[0]))
    text = console.export_text()
    assert "IMP 0.55" in text and "REL 0.40" in text and "IRR 0.05" in text and "not judged" in text


def sample_group(sample):
    from searchgrpo.events import GroupScored

    return GroupScored(1, 0, "s", "Q?", 1, [sample], 0.5, 0.0, False)
