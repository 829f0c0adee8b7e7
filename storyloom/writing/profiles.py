"""Multi-angle profiles (seed 002 多角度侧写): an entity's state as of a chapter.

A profile is a resource under ``/profiles`` whose levels are rendered from the facts the
book holds about its subject up to a chapter: L1 the structured overview (each attribute's
value now, with the chapter it comes from and what it was before), L2 the whole trajectory
with evidence, L0 a one-line abstract of about 50 tokens. Rendering is deterministic, so
regenerating a profile from the same facts gives the same text (and the store keeps no
new version); ``input_hash`` says what it was made from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from storyloom.writing.book_store import Fact, LevelWrite, Resource
from storyloom.writing.tokens import count_tokens

L0_TOKENS = 50

_PROFILE_FOLDER = {
    "character": "characters",
    "location": "world-state",
    "plot-thread": "plot-threads",
}
PROFILE_TYPE_OF_KIND = _PROFILE_FOLDER


@dataclass(frozen=True)
class ProfileTexts:
    path: str
    l0: str
    l1: str
    l2: str
    input_hash: str

    def writes(self, as_of_chapter: int, source: str = "profile") -> list[LevelWrite]:
        return [
            LevelWrite(self.path, "L0", self.l0, as_of_chapter, source, self.input_hash),
            LevelWrite(self.path, "L1", self.l1, as_of_chapter, source, self.input_hash),
            LevelWrite(self.path, "L2", self.l2, as_of_chapter, source, self.input_hash),
        ]


def profile_path(entity: Resource) -> str:
    """``/entities/characters/x`` → ``/profiles/characters/x``; a location's profile is
    part of the world state (``/profiles/world-state/x``)."""
    folder = _PROFILE_FOLDER.get(entity.kind, "world-state")
    return f"/profiles/{folder}/{entity.path.rsplit('/', 1)[1]}"


def subject_of(profile: Resource) -> str | None:
    """The entity a profile is about (``attrs.subject``), if it names one."""
    subject = profile.attrs.get("subject")
    return subject if isinstance(subject, str) else None


def render_profile(
    entity: Resource, facts: Sequence[Fact], as_of_chapter: int, *, path: str | None = None
) -> ProfileTexts:
    """The profile of ``entity`` from its facts of chapters up to ``as_of_chapter``."""
    known = sorted(
        (f for f in facts if f.chapter <= as_of_chapter),
        key=lambda f: (f.attribute, f.chapter),
    )
    history: dict[str, list[Fact]] = {}
    for fact in known:
        history.setdefault(fact.attribute, []).append(fact)
    kind = entity.kind.replace("-", " ")
    names = ", ".join(entity.aliases) if entity.aliases else entity.title
    l1_lines = [f"# {entity.title} ({kind}) — as of chapter {as_of_chapter}", f"names: {names}"]
    l2_lines = [f"# {entity.title} ({kind}): every fact, by chapter", f"names: {names}"]
    abstract: list[str] = []
    for attribute, steps in history.items():
        now = steps[-1]
        before = "; ".join(f"{s.value} (ch. {s.chapter})" for s in steps[:-1])
        line = f"- {attribute}: {now.value} (since ch. {now.chapter})"
        l1_lines.append(f"{line}; before: {before}" if before else line)
        abstract.append(f"{attribute} {now.value}")
        for step in steps:
            evidence = f" — “{step.evidence}”" if step.evidence else ""
            l2_lines.append(f"- ch. {step.chapter} · {attribute}: {step.value}{evidence}")
    l0 = _abstract(f"{entity.title} — {kind}", abstract)
    payload = json.dumps(
        {
            "entity": [entity.path, entity.title, entity.kind, list(entity.aliases)],
            "asOf": as_of_chapter,
            "facts": [asdict(f) for f in known],
        },
        ensure_ascii=False,
        sort_keys=True,
    )
    return ProfileTexts(
        path=path or profile_path(entity),
        l0=l0,
        l1="\n".join(l1_lines) + "\n",
        l2="\n".join(l2_lines) + "\n",
        input_hash=hashlib.sha256(payload.encode("utf-8")).hexdigest(),
    )


def _abstract(head: str, parts: Sequence[str]) -> str:
    """``head: a; b; c`` with as many parts as fit in :data:`L0_TOKENS`."""
    text = head
    for index, part in enumerate(parts):
        candidate = f"{text}{': ' if index == 0 else '; '}{part}"
        if count_tokens(candidate) > L0_TOKENS:
            break
        text = candidate
    return text


def profile_resource(book_id: str, path: str, entity: Resource, folder: str) -> Resource:
    """The profile resource of ``entity`` at ``path`` (a folder of /profiles)."""
    return Resource(
        book_id,
        path,
        "profile",
        entity.title,
        path.rsplit("/", 1)[0],
        0,
        entity.chapter_from,
        (),
        {"profileType": folder, "subject": entity.path},
    )
