"""The context snapshot (seed 001 3.3, "Punchcards"): what one turn may read.

Mnemosyne (:mod:`storyloom.chat.service.mnemosyne`) builds it for a pointer: the history chain
(root → pointer), the state at the pointer, the lore and RAG hits, the character,
background, persona and presets. It is immutable and plain JSON (it enters the chat
pipeline workflow as its ``snapshot`` input), and the same stored data gives the same
snapshot, down to its ``fingerprint``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.store.conversation import (
    BackgroundSnapshot,
    CharacterSnapshot,
    ConversationSettings,
)
from storyloom.chat.store.message import Role
from storyloom.chat.store.state import ChatState
from storyloom.chat.store.template_problem import TemplateProblem


class LoreRecord(BaseModel):
    """An activated (or dropped) lore entry, with the activation's reasons."""

    model_config = ConfigDict(extra="allow")

    kb_id: str
    kb_name: str = Field(default="", description="The KB's display name (the inspector's label)")
    scope: str = Field(
        default="", description="Why the KB is in the chat: global, character, persona or chat"
    )
    entry_id: str
    title: str = ""
    activated: bool = True
    placement: str | None = None
    tokens: int = 0
    reasons: list[dict[str, Any]] = Field(
        default_factory=list, description="[{rule, detail, outcome}]"
    )
    template: bool = Field(
        default=False, description="Its content is an EJS template, rendered for this turn"
    )
    template_problem: dict[str, Any] | None = Field(
        default=None,
        description="TemplateProblem {name, line, message, limit}: why the template was "
        "left as written",
    )


DROPPED_LORE_COLUMNS = ("kb_id", "kb_name", "scope", "entry_id", "title", "tokens", "reasons")
"""The columns of a compact dropped-lore row (:attr:`ContextSnapshot.lore_dropped`)."""


def dropped_lore_record(row: Sequence[Any]) -> dict[str, Any]:
    """A compact dropped-lore row as a :class:`LoreRecord`'s fields (``activated`` False)."""
    record = dict(zip(DROPPED_LORE_COLUMNS, row, strict=False))
    record["reasons"] = [dict(r) for r in record.get("reasons") or []]
    return {**record, "activated": False, "placement": None}


class HistoryMessage(BaseModel):
    """One message of the history chain as the prompt sees it."""

    model_config = ConfigDict(frozen=True)

    id: str
    role: Role
    name: str = ""
    content: str
    number: int | None = Field(
        default=None,
        description="Its place in the whole chat, 0 first (SillyTavern's message id, the "
        "chat's #n); the inspector and the lore reasons count messages by it",
    )
    tool_results: str = Field(
        default="",
        description="An agent turn's tool results (not the stealth ones) in the TAM result "
        "format, as the model read them; the prompt puts them before the reply text",
    )


class LoreHit(BaseModel):
    """An activated lore entry with its injected text and placement."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kb_id: str
    kb_name: str = Field(default="", description="The KB's display name (the inspector's label)")
    scope: str = Field(
        default="", description="Why the KB is in the chat: global, character, persona or chat"
    )
    entry_id: str
    title: str = ""
    content: str
    placement: str = Field(description="The CAIU placement (before_char, at_depth, ...)")
    depth: int | None = None
    role: str | None = None
    priority: int = 0
    tokens: int = 0
    prompt_top: bool = Field(
        default=False,
        description="A [GENERATE:BEFORE] entry (ST-Prompt-Template): the first block of the prompt",
    )


class RagHit(BaseModel):
    """A retrieved memory (an event summary of this or a related conversation)."""

    model_config = ConfigDict(frozen=True)

    id: str
    content: str
    score: float
    source: str = Field(description="Conversation or summary preset it came from")


class LoreCut(BaseModel):
    """What the lore budget cut from a reply's prompt; the chat's notice words it in the
    page's language (``extra.lore_cut`` of the reply)."""

    model_config = ConfigDict(frozen=True)

    count: int = Field(ge=1, description="Entries the lore budget left out")
    constant: list[str] = Field(
        default_factory=list, description="The names of the constant entries among them"
    )
    budget: int = Field(description="The lore budget in tokens")


class ContextSnapshot(BaseModel):
    """Everything a chat turn reads; nodes never reach into storage themselves."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    pointer: str | None
    history: list[HistoryMessage]
    history_omitted: int = Field(
        default=0, description="Older messages of the chain beyond the context window"
    )
    state: ChatState
    character: CharacterSnapshot
    background: BackgroundSnapshot | None = None
    settings: ConversationSettings
    lore: list[LoreHit] = Field(default_factory=list)
    lore_report: list[LoreRecord] = Field(
        default_factory=list,
        description="Activated entries with reasons (a snapshot stored before lore_dropped "
        "existed also holds its dropped ones here)",
    )
    lore_dropped: list[list[Any]] = Field(
        default_factory=list,
        description="Dropped entries, one compact row each: [kb_id, kb_name, scope, "
        "entry_id, title, tokens needed, reasons that cut it]; a big book over its budget "
        "cuts thousands in every turn, so the full records are built only when read",
    )
    lore_cut: LoreCut | None = Field(
        default=None, description="What the lore budget cut (None: nothing)"
    )
    lore_timed_effects: dict[str, Any] = Field(
        default_factory=dict,
        description="TimedEffectsState after this turn's activation (goes into the state)",
    )
    rag: list[RagHit] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list, description="Plot-point summaries")
    global_regex_scripts: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The user's global regex scripts in force (enabled only); they run "
        "before regex_scripts, as SillyTavern runs its global scope before the character's",
    )
    regex_scripts: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The character card's regex scripts in force (when the chat allows them)",
    )
    regex_problems: list[str] = Field(
        default_factory=list,
        description="Why regex scripts that should have run did not (a global scripts file "
        "that does not read); the prompt's warnings carry them",
    )
    generation: str = Field(default="normal", description="normal, swipe, continue, impersonate")
    seed: int = Field(
        default=0, description="This reply's: {{random}}, {{roll}}, lore probability rolls"
    )
    chat_seed: int = Field(default=0, description="The conversation's: {{pick}}")
    now: str = Field(default="", description="ISO time of the turn, for {{time}}/{{date}}")
    idle_since: str = Field(
        default="",
        description="ISO time of the user's message before the newest message, for "
        "{{idle_duration}} ('': none)",
    )
    global_variables: dict[str, Any] = Field(
        default_factory=dict,
        description="The user's global variables as the turn starts ({{$x}}, {{getglobalvar}})",
    )
    template_global_variables: dict[str, Any] | None = Field(
        default=None,
        description="The global variables once the turn's EJS templates wrote to them "
        "(the prompt's macros start from these); None: templates wrote none",
    )
    preset_templates: dict[str, str] = Field(
        default_factory=dict,
        description="The preset's prompts holding an EJS template, as rendered this turn "
        "(the text as written → rendered; the Skein Builder sends the rendered one)",
    )
    template_problems: list[TemplateProblem] = Field(
        default_factory=list,
        description="The turn's EJS templates left as written, and why",
    )
    agent_profile: str | None = Field(
        default=None,
        description="The agent profile the reply is written with (the conversation's "
        "setting, else the one the user confirmed for the character); None: a plain reply",
    )
    connection: str | None = Field(
        default=None,
        description="The named connection that writes the reply (the group member's, "
        "else the chat's, else the character card's); None: the user model",
    )
    connection_chosen_in: str = Field(
        default="", description="Where the connection was picked (for the error when it is gone)"
    )
    turn_key: str = Field(
        default="",
        description="Seeds the turn's tool calls that must replay (chat:RollDice): the same "
        "for every swipe of a reply unless the swipe asks for a reroll",
    )

    def lore_records(self) -> list[LoreRecord]:
        """Every lore record of the turn: the activated ones, then the dropped ones."""
        dropped = [LoreRecord.model_validate(dropped_lore_record(r)) for r in self.lore_dropped]
        return [*self.lore_report, *dropped]

    @property
    def fingerprint(self) -> str:
        """A hash of the whole snapshot: equal stored data gives an equal fingerprint."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
