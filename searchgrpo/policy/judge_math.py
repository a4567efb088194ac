"""The in-process judge's arithmetic, in small pure functions (`policy/judge.py` uses them).

One forward pass scores a batch of documents of one state: the state's shared prompt start (the
prefix) is in the KV cache; each row's queries are the document's own prompt tokens (its suffix,
left-padded to a common width S) followed by the three label continuations (each right-padded to
a common width M):

    keys:    [ prefix (P) | pad .. suffix (S) | label 1 (M) | label 2 (M) | label 3 (M) ]

A suffix token sees the prefix and the suffix up to itself; a label token sees the prefix, the
whole suffix and its own label up to itself (never the other labels); padding sees only itself (so
that no row of the attention is empty). Positions continue from the prefix as if each label
directly followed its own document. The logits kept are the last 1 + 3M: the suffix's last token
(it predicts every label's first token) and every label token (each predicts the next).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading items `a` and `b` share.

    >>> common_prefix_length([1, 2, 3], [1, 2, 4, 5]), common_prefix_length([], [1]), common_prefix_length([7], [7])
    (2, 0, 1)
    """
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class JudgeLayout:
    """Where every query of a batch sits (see the module docstring)."""

    mask: torch.Tensor
    """[B, 1, Q, P + Q] boolean: query i may attend to key j (prefix keys first)."""
    positions: torch.Tensor
    """[B, Q] position ids of the queries."""
    suffix_width: int
    """S: suffixes are left-padded to this width."""
    label_width: int
    """M: each label continuation is right-padded to this width."""


def judge_layout(prefix_len: int, suffix_lens: Sequence[int], label_lens: Sequence[int]) -> JudgeLayout:
    """The attention mask and positions of a batch of documents (rows) with these suffix lengths,
    after a prefix of `prefix_len` tokens, each followed by labels of `label_lens` tokens."""
    if not suffix_lens or min(suffix_lens) < 1 or not label_lens or min(label_lens) < 1:
        raise ValueError("every suffix and every label needs at least one token")
    rows, s, m, n_labels = len(suffix_lens), max(suffix_lens), max(label_lens), len(label_lens)
    q = s + n_labels * m
    suffix_len = torch.tensor(suffix_lens).view(rows, 1)
    col = torch.arange(q).view(1, q)
    in_suffix = (col >= s - suffix_len) & (col < s)  # [B, Q] real suffix tokens
    segment = torch.where(col < s, 0, 1 + (col - s) // m).expand(rows, q)  # 0 suffix, l + 1 label l
    offset = (col - s) % m  # index of a label token within its label
    label_len = torch.tensor(label_lens)
    in_label = (col >= s) & (offset < label_len[(segment - 1).clamp(min=0)])
    real = in_suffix | in_label  # [B, Q]
    qi, kj = col.view(1, q, 1), col.view(1, 1, q)
    seg_q, seg_k = segment.unsqueeze(2), segment.unsqueeze(1)
    sees = real.unsqueeze(2) & (
        (in_suffix.unsqueeze(1) & (seg_q == 0) & (kj <= qi))  # suffix to earlier suffix
        | (in_suffix.unsqueeze(1) & (seg_q > 0))  # label to the whole suffix
        | (in_label.unsqueeze(1) & (seg_k == seg_q) & (seg_q > 0) & (kj <= qi))  # label to its own label
    )
    sees |= torch.eye(q, dtype=torch.bool).unsqueeze(0)  # every query sees itself
    prefix = real.unsqueeze(2).expand(rows, q, prefix_len)
    mask = torch.cat([prefix, sees], dim=2).unsqueeze(1)
    start = prefix_len + (col - (s - suffix_len))  # suffix tokens continue the prefix
    after = prefix_len + suffix_len + offset  # label tokens continue their document
    positions = torch.where(col < s, start, after).clamp(min=prefix_len).expand(rows, q)
    return JudgeLayout(mask, positions.contiguous(), s, m)


def label_sources(label_width: int, labels: int = 3) -> torch.Tensor:
    """[labels, M] index, among the kept logits (the last 1 + labels * M), of the position that
    predicts each label token: 0 (the suffix's last token) for a first token, else the label's own
    previous token.

    >>> label_sources(2).tolist()
    [[0, 1], [0, 3], [0, 5]]
    """
    j = torch.arange(label_width).view(1, label_width)
    label = torch.arange(labels).view(labels, 1)
    return torch.where(j == 0, 0, label * label_width + j)


def label_targets(label_ids: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([labels, M] token ids right-padded with `pad_id`, [labels, M] mask of real tokens).

    >>> ids, mask = label_targets([[5, 9], [6], [7, 8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 9], [6, 0], [7, 8]], [[True, True], [True, False], [True, True]])
    """
    width = max(len(ids) for ids in label_ids)
    ids = torch.full((len(label_ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(label_ids), width), dtype=torch.bool)
    for i, seq in enumerate(label_ids):
        ids[i, : len(seq)] = torch.tensor(list(seq), dtype=torch.long)
        mask[i, : len(seq)] = True
    return ids, mask


def sequence_logprobs(token_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[..., L] log-probability of each label's whole sequence: the sum of its real tokens' [..., L, M]
    log-probabilities (the chain rule; padding masked out).

    >>> lp = torch.log(torch.tensor([[[0.5, 0.2], [0.1, 0.9]]], dtype=torch.float64))
    >>> [round(p, 12) for p in sequence_logprobs(lp, torch.tensor([[True, True], [True, False]])).exp()[0].tolist()]
    [0.1, 0.1]
    """
    return torch.where(mask, token_logprobs, torch.zeros_like(token_logprobs)).sum(dim=-1)


def label_probabilities(label_logprobs: torch.Tensor) -> torch.Tensor:
    """[..., L] probabilities of the labels, normalised over the labels alone: p_l =
    exp(lp_l) / sum_k exp(lp_k), computed stably in float64.

    >>> lp = torch.log(torch.tensor([0.1, 0.3, 0.1], dtype=torch.float64))
    >>> [round(p, 12) for p in label_probabilities(lp).tolist()]
    [0.2, 0.6, 0.2]
    """
    return torch.softmax(label_logprobs.double(), dim=-1)
