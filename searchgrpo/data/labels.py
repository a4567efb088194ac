"""The DocumentChecker's three labels, and what the data records about a question's documents."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Label(str, Enum):
    """The checker's three labels."""

    IMPORTANT = "IMPORTANT"
    RELEVANT = "RELEVANT"
    IRRELEVANT = "IRRELEVANT"

    @classmethod
    def parse(cls, text: object) -> Label | None:
        if isinstance(text, str) and text.strip().upper() in cls.__members__:
            return cls[text.strip().upper()]
        return None


@dataclass
class QuestionLabels:
    """What the data says about one question's documents."""

    question: str
    labels: dict[str, Label] = field(default_factory=dict)
    """Recorded labels by docid (gold docids are IMPORTANT)."""

    @property
    def important(self) -> set[str]:
        return {d for d, lab in self.labels.items() if lab is Label.IMPORTANT}
