"""A deterministic generator of a demo world: the embedded default's corpus and questions.

The world is made of invented entities (people, companies, films, cities, universities, regions)
whose names no model has seen, so clues must come from the state, not from memory. Facts point one
way only, which is what makes the questions multi-hop: a company's page names its founder, but the
founder's page never names the company. "In which city was the founder of Krallo Systems born?"
therefore needs two searches: one that finds Krallo Systems (it names the founder), then one that
names the founder (their page names the city).

`generate_world(questions, distractors, seed)` returns documents plus question records in the
normalised schema of `../shared/data/`; the same arguments always give the same world, and any size
can be asked for (`generate_corpus` makes scale corpora of a given number of documents).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from searchgrpo.data.corpus import Document
from searchgrpo.data.demo_words import (
    CITY_ADJ,
    CODAS,
    COMPANY_KINDS,
    DIRECTOR_OCCUPATIONS,
    EVENTS,
    FILLERS,
    FILM_ADJ,
    FILM_NOUN,
    GENRES,
    NATIONS,
    OCCUPATIONS,
    ONSETS,
    SUBJECTS,
    VOWELS,
)
from searchgrpo.data.questions import QuestionRecord

GENERATOR_VERSION = 1


def _docid(title: str, text: str) -> str:
    return "demo-" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:12]


@dataclass
class _Names:
    """Unique invented names."""

    rng: random.Random
    used: set[str] = field(default_factory=set)

    def word(self, syllables: int) -> str:
        parts = [self.rng.choice(ONSETS) + self.rng.choice(VOWELS) + self.rng.choice(CODAS) for _ in range(syllables)]
        return "".join(parts).capitalize()

    def unique(self, make) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted")

    def person(self) -> str:
        return self.unique(lambda: f"{self.word(self.rng.choice((2, 2, 3)))} {self.word(self.rng.choice((2, 3)))}")

    def place(self) -> str:
        return self.unique(lambda: self.word(self.rng.choice((2, 3))))

    def company(self) -> tuple[str, str]:
        suffix, industry = self.rng.choice(COMPANY_KINDS)
        return self.unique(lambda: f"{self.word(2)} {suffix}"), industry

    def film(self) -> str:
        return self.unique(lambda: f"{self.rng.choice(FILM_ADJ)} {self.rng.choice(FILM_NOUN)} of {self.word(2)}")


@dataclass
class _Person:
    name: str
    pronoun: str
    born: int
    city: _City
    university: _University
    subject: str
    occupation: str
    nation: str


@dataclass
class _City:
    name: str
    region: str
    adjective: str
    population: int


@dataclass
class _University:
    name: str
    city: _City
    founded: int
    subject: str


class _WorldBuilder:
    def __init__(self, seed: int, size_hint: int) -> None:
        self.rng = random.Random(f"searchgrpo-demo:{seed}")
        self.names = _Names(self.rng)
        n_regions = max(4, size_hint // 25)
        self.regions = [f"{self.names.place()} Valley" if i % 2 else self.names.place() for i in range(n_regions)]
        self.cities = [
            _City(
                self.names.place(),
                self.rng.choice(self.regions),
                self.rng.choice(CITY_ADJ),
                self.rng.randrange(20, 900) * 1000,
            )
            for _ in range(max(8, size_hint // 4))
        ]
        self.universities = []
        for _ in range(max(4, size_hint // 8)):
            city = self.rng.choice(self.cities)
            name = self.names.unique(lambda: f"University of {self.names.word(2)}")
            self.universities.append(_University(name, city, self.rng.randrange(1500, 1990), self.rng.choice(SUBJECTS)))
        self.documents: list[Document] = []
        self.doc_of: dict[str, Document] = {}
        for city in self.cities:
            self.doc_of[city.name] = self._add(city.name, self._city_text(city))
        for uni in self.universities:
            self.doc_of[uni.name] = self._add(uni.name, self._university_text(uni))

    # -- documents

    def _add(self, title: str, text: str) -> Document:
        doc = Document(_docid(title, text), title, text)
        self.documents.append(doc)
        return doc

    def _filler(self) -> str:
        if self.rng.random() < 0.5:
            return ""
        return " " + self.rng.choice(FILLERS).format(
            year=self.rng.randrange(1950, 2024), city=self.rng.choice(self.cities).name
        )

    def _city_text(self, c: _City) -> str:
        return (
            f"{c.name} is a {c.adjective} city in the {c.region} region. "
            f"It has about {c.population:,} inhabitants." + self._filler()
        )

    def _university_text(self, u: _University) -> str:
        return (
            f"The {u.name} is a public university in {u.city.name}, founded in {u.founded}. "
            f"It is best known for its {u.subject} faculty." + self._filler()
        )

    def person(self, occupations: list[str]) -> _Person:
        rng = self.rng
        return _Person(
            name=self.names.person(),
            pronoun=rng.choice(("He", "She")),
            born=rng.randrange(1930, 1995),
            city=rng.choice(self.cities),
            university=rng.choice(self.universities),
            subject=rng.choice(SUBJECTS),
            occupation=rng.choice(occupations),
            nation=rng.choice(NATIONS),
        )

    def add_person(self, p: _Person) -> Document:
        text = (
            f"{p.name} (born {p.born}) is a {p.nation} {p.occupation}. "
            f"{p.pronoun} was born in {p.city.name} and studied {p.subject} at the {p.university.name}."
            + self._filler()
        )
        return self._add(p.name, text)

    def add_company(self, founder: _Person) -> tuple[str, Document]:
        name, industry = self.names.company()
        hq = self.rng.choice(self.cities)
        year = founder.born + self.rng.randrange(22, 45)
        article = "an" if industry[0] in "aeiou" else "a"
        text = (
            f"{name} is {article} {industry} company headquartered in {hq.name}. "
            f"It was founded in {year} by {founder.name}." + self._filler()
        )
        return name, self._add(name, text)

    def add_film(self, director: _Person) -> tuple[str, Document]:
        title = self.names.film()
        year = director.born + self.rng.randrange(25, 50)
        genre = self.rng.choice(GENRES)
        text = f"{title} is a {year} {genre} film directed by {director.name}." + self._filler()
        return title, self._add(title, text)

    def add_distractor(self) -> Document:
        kind = self.rng.randrange(4)
        if kind == 0:
            return self.add_person(self.person(OCCUPATIONS + DIRECTOR_OCCUPATIONS))
        if kind == 1:
            return self.add_company(self.person(OCCUPATIONS))[1]
        if kind == 2:
            return self.add_film(self.person(DIRECTOR_OCCUPATIONS))[1]
        city = self.rng.choice(self.cities)
        event = self.rng.choice(EVENTS)
        title = f"{city.name} {event}"
        if title in self.names.used:  # every city has each event at most once
            return self.add_person(self.person(OCCUPATIONS))
        self.names.used.add(title)
        year = self.rng.randrange(1900, 2015)
        return self._add(title, f"The {title} has been held every year in {city.name} since {year}." + self._filler())


def _question(b: _WorldBuilder, index: int) -> QuestionRecord:
    rng = b.rng
    template = rng.randrange(7)
    if template in (0, 1, 4):  # company -> founder -> ...
        founder = b.person(OCCUPATIONS)
        founder_doc = b.add_person(founder)
        anchor, anchor_doc = b.add_company(founder)
        role, goal1 = "founder", f"find who founded {anchor}"
    else:
        founder = b.person(DIRECTOR_OCCUPATIONS)
        founder_doc = b.add_person(founder)
        anchor, anchor_doc = b.add_film(founder)
        role, goal1 = "director", f"find who directed {anchor}"
    gold = [anchor_doc, founder_doc]
    if template in (0, 2):
        question = f"In which city was the {role} of {anchor} born?"
        answer, goals = founder.city.name, [goal1, f"find where the {role} was born"]
    elif template in (1, 3):
        question = f"Which university did the {role} of {anchor} attend?"
        answer, goals = founder.university.name, [goal1, f"find where the {role} studied"]
    elif template == 4:
        question = f"In which region is the birthplace of the {role} of {anchor}?"
        answer = founder.city.region
        goals = [goal1, f"find where the {role} was born", "find the region of that city"]
        gold.append(b.doc_of[founder.city.name])
    elif template == 5:
        question = f"In which city is the university attended by the {role} of {anchor}?"
        answer = founder.university.city.name
        goals = [goal1, f"find where the {role} studied", "find the city of that university"]
        gold.append(b.doc_of[founder.university.name])
    else:
        other = b.person(OCCUPATIONS)
        other_doc = b.add_person(other)
        other_anchor, other_anchor_doc = b.add_company(other)
        question = f"Were the {role} of {anchor} and the founder of {other_anchor} born in the same city?"
        answer = "yes" if founder.city is other.city else "no"
        goals = [goal1, f"find who founded {other_anchor}", "find where both were born"]
        gold += [other_anchor_doc, other_doc]
    distractors = _related_distractors(b, gold, 6)
    return QuestionRecord(
        id=f"demo:{index:06d}",
        question=question,
        answers=(answer,),
        docs=tuple(gold + distractors),
        gold=frozenset(d.docid for d in gold),
        sub_goals=tuple(goals),
    )


def _related_distractors(b: _WorldBuilder, gold: list[Document], n: int) -> list[Document]:
    """Documents that look like the gold ones (same kind of page), as the shared sets list."""
    gold_ids = {d.docid for d in gold}
    picks: list[Document] = []
    for _ in range(n * 4):
        if len(picks) >= n:
            break
        doc = b.rng.choice(b.documents)
        if doc.docid not in gold_ids and doc not in picks:
            picks.append(doc)
    return picks


@dataclass(frozen=True)
class World:
    """A generated corpus and the questions asked about it."""

    documents: list[Document]
    questions: list[QuestionRecord]


def generate_world(questions: int, distractors: int = 0, seed: int = 0) -> World:
    """The demo world with `questions` multi-hop questions and `distractors` extra documents."""
    b = _WorldBuilder(seed, questions + distractors // 4)
    records = []
    added = 0
    for i in range(questions):
        records.append(_question(b, i))
        # Interleave distractors so that neither kind clusters at one end of the corpus.
        while added < (i + 1) * distractors // questions:
            b.add_distractor()
            added += 1
    while added < distractors:
        b.add_distractor()
        added += 1
    return World(documents=list(b.documents), questions=records)


def generate_corpus(num_documents: int, seed: int = 0) -> Iterator[Document]:
    """A scale corpus of exactly `num_documents` demo-world documents (for benchmarks), streamed."""
    b = _WorldBuilder(seed, max(num_documents // 4, 8))
    emitted = 0
    while emitted < num_documents:
        if not b.documents:
            b.add_distractor()
        batch, b.documents = b.documents, []
        for doc in batch[: num_documents - emitted]:
            yield doc
            emitted += 1
