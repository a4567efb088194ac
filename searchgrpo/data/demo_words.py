"""The demo world's vocabulary: syllables for invented names, kinds of companies, film titles,
occupations, nations, events and filler sentences (`demo_world.py` draws from these in order, so
changing any list changes every generated world: bump `demo_world.GENERATOR_VERSION` with it)."""

from __future__ import annotations

ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "kr",
    "st",
    "th",
    "sh",
    "tr",
]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei"]
CODAS = ["", "", "", "", "n", "r", "l", "s", "m", "k", "th", "nd"]
COMPANY_KINDS = [
    ("Systems", "software"),
    ("Dynamics", "robotics"),
    ("Labs", "biotechnology"),
    ("Motors", "automotive"),
    ("Foods", "food processing"),
    ("Works", "steel"),
    ("Energy", "energy"),
    ("Textiles", "textile"),
    ("Aerospace", "aerospace"),
    ("Pharma", "pharmaceutical"),
    ("Shipping", "shipping"),
    ("Games", "video game"),
]
FILM_ADJ = [
    "Silent",
    "Crimson",
    "Hollow",
    "Golden",
    "Broken",
    "Distant",
    "Burning",
    "Frozen",
    "Hidden",
    "Last",
    "Wandering",
    "Quiet",
    "Scarlet",
    "Endless",
    "Forgotten",
    "Iron",
    "Pale",
    "Wild",
]
FILM_NOUN = [
    "Harbor",
    "Winter",
    "Orchard",
    "Signal",
    "Mirror",
    "Garden",
    "Tide",
    "Crown",
    "Lantern",
    "Frontier",
    "Echo",
    "River",
    "Citadel",
    "Voyage",
    "Meadow",
    "Archive",
    "Summit",
    "Veil",
]
GENRES = ["drama", "thriller", "comedy", "science fiction", "documentary", "war", "romance", "horror"]
OCCUPATIONS = [
    "engineer",
    "entrepreneur",
    "chemist",
    "economist",
    "architect",
    "physician",
    "inventor",
    "investor",
    "designer",
    "lawyer",
]
DIRECTOR_OCCUPATIONS = ["film director", "screenwriter", "film director and producer", "cinematographer"]
SUBJECTS = [
    "physics",
    "law",
    "economics",
    "medicine",
    "chemistry",
    "history",
    "mathematics",
    "architecture",
    "philosophy",
    "film studies",
    "engineering",
    "literature",
]
NATIONS = ["Quellish", "Varnian", "Ostrandic", "Meridese", "Talvian", "Korrenian"]
CITY_ADJ = ["coastal", "mountain", "river", "industrial", "university", "market", "harbour", "lakeside"]
EVENTS = [
    "Jazz Festival",
    "Marathon",
    "Book Fair",
    "Film Week",
    "Science Fair",
    "Harvest Market",
    "Chess Open",
    "Regatta",
]
FILLERS = [
    "Records from the early years are incomplete.",
    "The name is sometimes spelled differently in older sources.",
    "An exhibition about it opened in {city} in {year}.",
    "It was the subject of a documentary in {year}.",
    "An archive of related letters is kept in {city}.",
]
