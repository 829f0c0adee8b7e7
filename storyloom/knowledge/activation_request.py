"""What one activation scan is asked: the chat, the character, and the request's values.

:class:`ActivationRequest` holds everything a scan depends on (the same request gives the
same result); ``SCAN_SOURCES`` lists the character and persona fields an entry may
``also_scan``, in SillyTavern's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from storyloom.knowledge.caiu import ScanSource
from storyloom.knowledge.timed_effects import TimedEffectsState

# SillyTavern's globalScanData order; each is a CharacterContext attribute.
SCAN_SOURCES: tuple[tuple[ScanSource, str, str], ...] = (
    ("persona_description", "persona_description", "persona description"),
    ("character_description", "description", "character description"),
    ("character_personality", "personality", "character personality"),
    ("character_depth_prompt", "depth_prompt", "character depth prompt"),
    ("scenario", "scenario", "scenario"),
    ("creator_notes", "creator_notes", "creator notes"),
)


@dataclass(frozen=True, slots=True)
class ScanMessage:
    """One chat message as the scan sees it."""

    name: str
    text: str
    is_user: bool = False
    number: int | None = None
    """Its place in the whole chat (0 first), which the reasons name it by; None: counted
    back from the chat's length. A chat that hides messages from the prompt scans fewer
    messages than it has, so counting back would name the wrong ones."""


class CharacterContext(BaseModel):
    """The character and persona of the chat: names, filters and ``also_scan`` texts."""

    name: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    depth_prompt: str = ""
    creator_notes: str = ""
    persona_description: str = ""
    tags: list[str] = Field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ActivationRequest:
    """Everything one scan depends on; the same request gives the same result."""

    messages: Sequence[ScanMessage] = ()
    """The chat, oldest first (at least the newest messages the scan needs)."""
    chat_length: int | None = None
    """Messages in the whole chat, for delay/sticky/cooldown; None: ``len(messages)``."""
    variables: Mapping[str, Any] = field(default_factory=dict)
    timed_state: TimedEffectsState = field(default_factory=TimedEffectsState)
    character: CharacterContext | None = None
    generation_type: str = "normal"
    max_context_tokens: int = 8192
    seed: int | str = 0
    semantic_scores: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """Similarity per (kb_id, entry_id), computed by the caller."""
    extra_scan_texts: Sequence[str] = ()
    """More text scanned with the chat, e.g. an author's note that allows scanning."""
    template_texts: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Per (kb_id, entry_id): the entry's content as its EJS template rendered it this
    turn, which the scan, the token count and the prompt use instead of the content."""
    template_excluded: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Per (kb_id, entry_id): why a template keeps the entry out of this scan (a reason
    term: ``template_if_false``, ``template_render_only``)."""
