"""The in-process judge (`checker.backend: base`): its arithmetic by hand, and on the tiny model the
same labels and probabilities as a plain forward of each whole prompt and label."""

import math

import pytest
import torch

from searchgrpo.agents.checker import CheckRequest
from searchgrpo.agents.llm_checker import build_messages
from searchgrpo.config import ConfigError
from searchgrpo.data.labels import Label
from searchgrpo.policy.base_view import adapter_free_view, shares_weights
from searchgrpo.policy.judge import BaseJudge, judge_attention, label_token_ids, open_base_judge
from searchgrpo.policy.judge_math import (
    common_prefix_length,
    judge_layout,
    label_probabilities,
    label_sources,
    label_targets,
    sequence_logprobs,
)
from searchgrpo.policy.model import load_frozen_base, load_policy, policy_on
from searchgrpo.world import load_dataset
from tests.helpers.tiny import tiny_config

# ----------------------------------------------------------------------------- the arithmetic


def test_judge_passes_leave_cudnn_attention_out_on_cuda_only_and_restore_it():
    """cuDNN's attention plans a kernel per new shape; every judge batch has new shapes
    (docs/performance.md): on CUDA the judge's passes run without it, every other kernel allowed."""
    before = (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled())
    with judge_attention(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    assert (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled()) == before
    with judge_attention(torch.device("cpu")):
        assert torch.backends.cuda.cudnn_sdp_enabled() == before[0]


def test_layout_of_two_documents_and_three_labels_by_hand():
    # Prefix of 2 tokens; suffixes of 1 and 2 tokens (S = 2); labels of 1, 2 and 1 tokens (M = 2).
    layout = judge_layout(2, [1, 2], [1, 2, 1])
    assert (layout.suffix_width, layout.label_width) == (2, 2)
    # Queries: [s0 s1 | L1 L1' | L2 L2' | L3 L3'] (a prime is a label's second slot); keys: 2 prefix + 8.
    row0 = [  # suffix of 1 token: s0 is padding; L1' and L3' are padding
        [0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 1, 1, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 1, 1, 0, 0],
        [1, 1, 0, 1, 0, 0, 0, 0, 1, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    ]
    row1 = [
        [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 0, 0, 0, 1, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    ]
    assert layout.mask.shape == (2, 1, 8, 10)
    assert layout.mask[0, 0].int().tolist() == row0
    assert layout.mask[1, 0].int().tolist() == row1
    # Positions continue the prefix (0, 1): a label starts right after its own document.
    assert layout.positions.tolist() == [[2, 2, 3, 4, 3, 4, 3, 4], [2, 3, 4, 5, 4, 5, 4, 5]]


def test_label_arithmetic_by_hand():
    assert common_prefix_length([4, 5, 6], [4, 5, 9, 9]) == 2
    # Kept logits: 0 = the suffix's last token, then label l's token j at 1 + l * M + j.
    assert label_sources(3, 2).tolist() == [[0, 1, 2], [0, 4, 5]]
    ids, real = label_targets([[7], [8, 9, 10]], pad_id=0)
    assert ids.tolist() == [[7, 0, 0], [8, 9, 10]] and real.sum(dim=1).tolist() == [1, 3]
    # log(0.5) + log(0.4) = log(0.2); the padded slot's -100 is ignored.
    tokens = torch.log(torch.tensor([[[0.5, 0.4], [0.3, 1e-44]]]))
    tokens[0, 1, 1] = -100.0
    seq = sequence_logprobs(tokens, torch.tensor([[True, True], [True, False]]))
    assert seq.exp().tolist()[0] == pytest.approx([0.2, 0.3])
    # Normalised over the three labels alone: 0.2, 0.3, 0.5 of a total of 0.04 + 0.06 + 0.1 = 0.2.
    probs = label_probabilities(torch.log(torch.tensor([0.04, 0.06, 0.1])))
    assert probs.tolist() == pytest.approx([0.2, 0.3, 0.5]) and float(probs.sum()) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- on the tiny model


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    cfg = tiny_config(
        tmp_path_factory.mktemp("judge"), "checker.backend=base", "checker.cache=false", "checker.base_batch_size=3"
    )
    dataset = load_dataset(cfg)
    policy = load_policy(cfg)
    with torch.no_grad():  # a trained-looking adapter: the judge must not see it
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    return cfg, dataset, policy


def requests_of(dataset, states=2, docs=7):
    out = []
    documents = list(dataset.corpus)
    for i, state in enumerate(dataset.train[:states]):
        for doc in documents[i * docs : (i + 1) * docs]:
            out.append(CheckRequest(state.question_id, state.question, state.sub_goals, doc.docid, doc.title, doc.text))
    return out


def plain_label_logprobs(model, tokenizer, request, max_doc_chars):
    """The reference: the whole chat prompt (apply_chat_template's own tokens) and each label, one
    unpadded forward each, summed log-softmax over the label's tokens."""
    prompt = tokenizer.apply_chat_template(
        build_messages(request, max_doc_chars), add_generation_prompt=True, tokenize=True, enable_thinking=False
    )
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")  # the tiny model's ChatML end of turn
    out = []
    for label in Label:
        ids = [*tokenizer(label.value, add_special_tokens=False).input_ids, end]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        out.append(sum(float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(ids)))
    return out


def test_judge_equals_a_plain_forward_of_each_prompt_and_label(world):
    cfg, dataset, policy = world
    judge = open_base_judge(cfg, policy)
    assert judge.packed  # the shared-prefix path is what is measured against the plain forward
    requests = requests_of(dataset)
    verdicts = judge.check(requests)
    base = load_frozen_base(cfg)  # an independent copy of the base weights, no adapter anywhere
    for request, verdict in zip(requests, verdicts):
        reference = plain_label_logprobs(base.model, base.tokenizer, request, cfg.checker.max_doc_chars)
        total = math.fsum(math.exp(x) for x in reference)
        expected = [math.exp(x) / total for x in reference]
        assert verdict.probs == pytest.approx(expected, abs=1e-5)
        assert math.fsum(verdict.probs) == pytest.approx(1.0, abs=1e-12)
        assert verdict.label is list(Label)[max(range(3), key=lambda i: expected[i])]
    # The plain-rows path (models whose attention takes no custom mask) gives the same numbers.
    judge.packed = False
    again = judge.check(requests)
    for a, b in zip(verdicts, again):
        assert a.label is b.label and a.probs == pytest.approx(b.probs, abs=1e-5)
    stats = judge.stats()
    assert stats["requests"] == stats["calls"] == 2 * len(requests) and stats["cache_hits"] == 0


def test_the_view_skips_the_adapter_and_copies_no_weight(world):
    _, _, policy = world
    view = adapter_free_view(policy.model)
    assert shares_weights(view, policy.model)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        with policy.reference_mode():
            reference = policy.model(input_ids=ids).logits
        adapted = policy.model(input_ids=ids).logits
        seen = view(input_ids=ids).logits
    assert torch.equal(seen, reference) and not torch.allclose(seen, adapted)
    # The trainer's switches do not reach the view: adapter off in its tree, train mode on.
    policy.model.train()
    with policy.reference_mode():
        assert not view.training
    assert torch.equal(view(input_ids=ids).logits.detach(), reference)


def test_verdicts_and_probabilities_come_back_from_the_cache(world, tmp_path):
    cfg, dataset, policy = world
    cached = cfg.replace(**{"checker.cache": True, "checker.cache_path": str(tmp_path / "v.sqlite")})
    requests = requests_of(dataset, states=1, docs=4)
    first = open_base_judge(cached, policy)
    fresh = first.check(requests)
    first.close()
    second = open_base_judge(cached, policy)
    again = second.check(requests)
    assert second.stats()["cache_hits"] == len(requests) and second.stats()["calls"] == 0
    assert [(v.label, v.probs) for v in again] == [(v.label, v.probs) for v in fresh]
    # Another model is another key: nothing is read across models.
    other = BaseJudge(policy.model, policy.tokenizer, "cpu", model_key="other", cache=second.cache)
    other.check(requests[:1])
    assert other.stats()["calls"] == 1
    assert second.key(requests[0]).model.startswith("base:") and second.key(requests[0]) != other.key(requests[0])
    second.close()


def test_an_eval_policy_borrows_the_judges_base_and_gives_it_back(world):
    cfg, dataset, _ = world
    base = load_frozen_base(cfg)
    judge = open_base_judge(cfg, base)
    requests = requests_of(dataset, states=1, docs=3)
    before = judge.check(requests)
    with policy_on(cfg, None, base) as policy:
        assert any("lora" in n for n, _ in policy.model.named_parameters())
        with torch.no_grad():
            for name, param in policy.model.named_parameters():
                if "lora_B" in name:
                    param.normal_(0, 0.5)
        during = judge.check(requests)  # the judge made before the adapter came (no cache: computed again)
        made_during = BaseJudge(base.model, base.tokenizer, "cpu", model_key="k").check(requests)
    assert not any("lora" in n for n, _ in base.model.named_parameters())  # the adapter is gone again
    for verdicts in (during, made_during, judge.check(requests)):
        assert [v.probs for v in verdicts] == [pytest.approx(v.probs, abs=1e-6) for v in before]


class WordTokenizer:
    """Builds a real word-level tokenizer (tokenizers library) that knows no label word."""

    @staticmethod
    def build():
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        vocab = {"<unk>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "hello": 3}
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", bos_token="<|im_start|>"
        )
        fast.chat_template = (
            "{% for m in messages %}<|im_start|> {{ m['content'] }} <|im_end|> {% endfor %}"
            "{% if add_generation_prompt %}<|im_start|> {% endif %}"
        )
        return fast


def test_labels_the_tokenizer_cannot_tell_apart_are_refused_in_one_line(world):
    _, _, policy = world
    sequences = label_token_ids(policy.tokenizer, "tiny")
    end = policy.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert all(s[-1] == end for s in sequences) and len({tuple(s) for s in sequences}) == 3
    with pytest.raises(ConfigError) as info:
        label_token_ids(WordTokenizer.build(), "words")
    message = str(info.value)
    assert "\n" not in message and "IMPORTANT and RELEVANT" in message and "checker.backend: llm" in message
