"""Who "he", "her", "他" and "她" are in a chapter, without a parser.

Role C reads claims such as "her blue eyes" or "He lifted it with his left hand": the
pronoun must become an entity before the claim can be checked. A character's gender is
read from the book itself (pronouns in sentences that name only that character, kin
words: a brother is a man); a pronoun then means the nearest earlier character of that
gender in the same sentence, else the last character of that gender who *acted*
(the subject of a verb), so "Anna thought of Tomas. He ..." is not Tomas.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from storyloom.writing.scene_entities import EntityMatcher, EntityMention

Gender = Literal["m", "f"]

HE = re.compile(r"\b(?:he|him|his|himself)\b", re.IGNORECASE)
SHE = re.compile(r"\b(?:she|her|hers|herself)\b", re.IGNORECASE)
PRONOUN = re.compile(r"\b(?:he|him|his|himself|she|her|hers|herself)\b|他|她", re.IGNORECASE)
_QUOTED = re.compile(r"“[^”]*”|\"[^\"\n]*\"|「[^」]*」|『[^』]*』")
KIN_GENDER: Mapping[str, Gender] = {
    "brother": "m",
    "father": "m",
    "son": "m",
    "sister": "f",
    "mother": "f",
    "daughter": "f",
}


def pronoun_gender(word: str) -> Gender:
    lower = word.casefold()
    return "f" if lower in ("she", "her", "hers", "herself", "她") else "m"


@dataclass(frozen=True)
class Referent:
    """A span of a sentence that refers to an entity: its name, or a resolved pronoun."""

    start: int
    end: int
    path: str
    pronoun: bool


@dataclass
class Genders:
    """Votes for each character's gender; the majority wins, a tie is unknown."""

    votes: dict[str, dict[Gender, int]] = field(default_factory=dict)

    def vote(self, path: str, gender: Gender, weight: int = 1) -> None:
        tally = self.votes.setdefault(path, {"m": 0, "f": 0})
        tally[gender] += weight

    def of(self, path: str) -> Gender | None:
        tally = self.votes.get(path)
        if tally is None or tally["m"] == tally["f"]:
            return None
        return "m" if tally["m"] > tally["f"] else "f"

    def read(self, sentences: Iterable[str], matcher: EntityMatcher, people: set[str]) -> None:
        """Pronouns outside dialogue in sentences that name exactly one character (and
        in the sentence after it, when that one names nobody) vote for that character."""
        last: str | None = None
        for sentence in sentences:
            narration = _QUOTED.sub(" ", sentence)
            named = {p for p in matcher.match(narration) if p in people}
            if len(named) == 1:
                last = next(iter(named))
            elif named:
                last = None
                continue
            if last is None:
                continue
            he = len(HE.findall(narration)) + narration.count("他")
            she = len(SHE.findall(narration)) + narration.count("她")
            if he and not she:
                self.vote(last, "m")
            elif she and not he:
                self.vote(last, "f")
            if not named:
                last = None


@dataclass
class Topics:
    """The last character of each gender who acted, carried from sentence to sentence."""

    genders: Genders
    people: set[str]
    last: dict[Gender | None, str] = field(default_factory=dict)

    def resolve(self, gender: Gender, before: Sequence[EntityMention]) -> str | None:
        """A pronoun of ``gender``: the nearest earlier character of that gender in the
        sentence, else the topic of that gender."""
        for mention in reversed(before):
            for path in mention.paths:
                if path in self.people and self.genders.of(path) == gender:
                    return path
        topic = self.last.get(gender)
        if topic is not None:
            return topic
        for mention in reversed(before):
            for path in mention.paths:
                if path in self.people and self.genders.of(path) is None:
                    return path
        unknown = self.last.get(None)
        if unknown is not None:
            return unknown
        # Nobody of that gender has acted yet: the book's only one, if it has one.
        only = [p for p in sorted(self.people) if self.genders.of(p) == gender]
        return only[0] if len(only) == 1 else None

    def referents(self, sentence: str, mentions: Sequence[EntityMention]) -> list[Referent]:
        """Names and resolved pronouns of ``sentence`` in text order (a pronoun inside
        dialogue is the speaker's "I"/"you" world and is left alone)."""
        out = [Referent(m.start, m.end, p, False) for m in mentions for p in m.paths[:1]]
        quoted = [(q.start(), q.end()) for q in _QUOTED.finditer(sentence)]
        for match in PRONOUN.finditer(sentence):
            if any(a <= match.start() < b for a, b in quoted):
                continue
            before = [m for m in mentions if m.end <= match.start()]
            path = self.resolve(pronoun_gender(match.group()), before)
            if path is not None:
                out.append(Referent(match.start(), match.end(), path, True))
        out.sort(key=lambda r: (r.start, r.end))
        return out

    def acted(self, path: str) -> None:
        if path in self.people:
            self.last[self.genders.of(path)] = path
