"""Intent analysis for Role A: who and what a scene is about, asked of the agent model.

Seed 002 starts Role A with intent analysis ("dialogue scene, chapter 12, characters:
protagonist, antagonist"). With an agent model, it reads the brief and the outline and
names the scene's entities and its kind; the names are resolved to the book's entities
by their titles and aliases. Without one, or when its answer is unusable, Role A matches
names in the text itself (:class:`~storyloom.writing.scene_entities.EntityMatcher`): an
unreadable answer never stops a chapter being written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from storyloom.core.errors import StoryloomError
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.errors import LLMError
from storyloom.writing.agent_json import ask_agent_json
from storyloom.writing.book_store import BookStore
from storyloom.writing.context_assembly import SCENE_TYPES, SceneType
from storyloom.writing.scene_entities import EntityMatcher

logger = logging.getLogger(__name__)

INTENT_SYSTEM = (
    "You plan what a novelist's next scene needs from the book's memory. From the brief "
    "and the outline, name the characters, places and plot threads the scene involves "
    "(only ones named or clearly meant) and the kind of scene. Answer only JSON: "
    '{"entities": ["<name>", ...], "sceneType": "dialogue|action|emotional|exposition|any"}'
)


class _Answer(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    entities: list[str] = Field(default_factory=list, max_length=200)
    scene_type: str = Field(default="any", alias="sceneType")


@dataclass(frozen=True)
class SceneIntent:
    entities: tuple[str, ...]
    """Entity paths."""
    scene_type: SceneType
    names: tuple[str, ...]
    """The names the agent gave, as it gave them (for the run log)."""


async def analyse_intent(
    endpoint: ChatEndpoint,
    store: BookStore,
    book_id: str,
    chapter: int,
    prompt: str,
    outline: str = "",
) -> SceneIntent | None:
    """The scene's entities and kind by the agent model; None when it failed (Role A
    then matches names itself)."""
    entities = [r for r in store.entities(book_id) if r.chapter_from < chapter]
    if not entities:
        return None
    roster = "\n".join(
        f"- {r.title}" + (f" (also: {', '.join(r.aliases)})" if r.aliases else "") for r in entities
    )
    user = (
        f"Chapter {chapter}.\n\nBrief:\n{prompt.strip() or '(none)'}\n\n"
        f"Outline:\n{outline.strip() or '(none)'}\n\nThe book's entities so far:\n{roster}"
    )
    try:
        answer = await ask_agent_json(endpoint, INTENT_SYSTEM, user, _Answer, what="intent")
    except (LLMError, StoryloomError) as exc:
        logger.info("intent analysis failed, matching names instead: %s", exc)
        return None
    matcher = EntityMatcher(entities)
    paths: list[str] = []
    for name in answer.entities:
        for mention in matcher.mentions(name):
            for path in mention.paths:
                if path not in paths:
                    paths.append(path)
    scene_type: SceneType = "any"
    if answer.scene_type in SCENE_TYPES:
        scene_type = answer.scene_type
    return SceneIntent(tuple(paths), scene_type, tuple(answer.entities))
