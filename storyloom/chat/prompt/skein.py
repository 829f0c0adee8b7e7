"""The Skein (seed 001 4.2): the prompt as a list of typed blocks, each with its source.

The shuttle nodes of the chat pipeline pass a Skein along (slot type ``SKEIN``): the
Skein Builder makes it from the context snapshot, later shuttles rewrite, drop or trim
blocks, and the Weaver renders it to chat messages. Because each block keeps where it
came from, the prompt inspector shows exactly which card field, lore entry or message
every part of a prompt is, how many tokens it took and what the budget cut.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.prompt.source_label import SourceValue, SourceWhat, english_label
from storyloom.chat.store.snapshot import LoreRecord


class BlockKind(StrEnum):
    SYSTEM = "system"  # the main prompt / system prompt
    PERSONA = "persona"  # the user's persona
    CHARACTER = "character"  # description, personality
    SCENARIO = "scenario"
    LORE = "lore"  # an activated lore entry (at its placement)
    EXAMPLES = "examples"  # example dialogue
    HISTORY = "history"  # one chat message
    AUTHORS_NOTE = "authors_note"
    POST_HISTORY = "post_history"  # post-history instructions ("jailbreak")
    RAG = "rag"  # retrieved summaries / memories
    SUMMARY = "summary"  # plot-point summaries the conversation started from
    DIRECTOR = "director"  # director guidance
    CUSTOM = "custom"  # a preset's own prompt
    FORMAT = "format"  # the format guide: how to write the answer (Filament), the state


BlockRole = Literal["system", "user", "assistant"]


SourceKind = Literal[
    "character",
    "persona",
    "preset",
    "lore",
    "message",
    "summary",
    "rag",
    "director",
    "background",
    "conversation",
    "workflow",
    "script",  # added by a chat:Script node; ``id`` is the script's name
]


class BlockSource(BaseModel):
    """Where a block came from, for the prompt inspector."""

    model_config = ConfigDict(extra="allow")

    kind: SourceKind
    id: str | None = Field(default=None, description="Message id, 'kb_id/entry_id', preset id")
    field: str | None = Field(default=None, description="Card or preset field, prompt id")
    label: str = Field(default="", description="Words for a person: 'Card: description'")
    what: SourceWhat | None = Field(
        default=None,
        description="The label's kind, for the web app to say it in the page's language "
        "(None: a block a custom pipeline or script made; its label is all there is)",
    )
    values: dict[str, SourceValue] = Field(
        default_factory=dict, description="The label's values: names, numbers, ids"
    )

    @classmethod
    def of(
        cls,
        kind: SourceKind,
        what: SourceWhat,
        *,
        id: str | None = None,
        field: str | None = None,
        **values: SourceValue,
    ) -> BlockSource:
        """A source whose English label is made from its kind of label and values."""
        return cls(
            kind=kind,
            id=id,
            field=field,
            label=english_label(what, values),
            what=what,
            values=values,
        )


class SkeinBlock(BaseModel):
    """One piece of the prompt."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="Unique in the Skein: 'main', 'charDescription', 'msg:<id>'")
    kind: BlockKind
    role: BlockRole = "system"
    content: str
    source: BlockSource
    priority: int = Field(
        default=50, description="The budget cuts the lowest priority first (0-100)"
    )
    depth: int | None = Field(
        default=None,
        description="In-chat injection: this many messages from the end of the history "
        "(0 = after the last message); None: where the block stands in the list",
    )
    message_id: str | None = Field(default=None, description="History blocks: the message")
    name: str | None = Field(default=None, description="Speaker name, for history blocks")
    condition: str | None = Field(
        default=None, description="Prompt AST condition; the block is dropped when false"
    )
    enabled: bool = True
    tokens: int | None = Field(default=None, description="Token count, once measured")


class CutBlock(BaseModel):
    """A block the Token Budget removed or shortened, and why."""

    id: str
    kind: BlockKind
    tokens: int = Field(description="Tokens removed")
    reason: str = Field(description="Why, in English words")
    term: (
        Literal["over_budget", "beyond_context", "removed_by_script", "condition_false"] | None
    ) = Field(default=None, description="Why, for the web app to say in the page's language")
    values: dict[str, SourceValue] = Field(
        default_factory=dict, description="The reason's numbers: budget, priority, count"
    )


class ScriptRun(BaseModel):
    """What one chat:Script run did to the prompt, for the prompt inspector."""

    name: str = Field(description="'mood.lua', 'plugin:file.js', or '<node> (inline)'")
    node: str | None = Field(
        default=None, description="The workflow node whose own (inline) code ran; null: a file"
    )
    language: Literal["lua", "javascript"]
    duration_ms: float
    added: list[str] = Field(default_factory=list, description="Ids of the blocks it added")
    removed: list[str] = Field(default_factory=list, description="Ids of the blocks it removed")
    edited: list[str] = Field(default_factory=list, description="Ids of the blocks it changed")
    reordered: bool = Field(default=False, description="It changed the order of the blocks")
    variables: dict[str, Any] = Field(
        default_factory=dict, description="Variables it set (a removed one: null)"
    )
    output: str = Field(default="", description="What it printed")


class Skein(BaseModel):
    """The prompt being built. Blocks are in prompt order; history blocks are contiguous."""

    model_config = ConfigDict(extra="allow")

    blocks: list[SkeinBlock] = Field(default_factory=list)
    variables: dict[str, Any] = Field(
        default_factory=dict, description="Chat variables as changed by macros so far"
    )
    lore: list[LoreRecord] = Field(default_factory=list)
    lore_dropped: list[list[Any]] = Field(
        default_factory=list,
        description="Dropped lore entries as compact rows (ContextSnapshot.lore_dropped)",
    )
    cut: list[CutBlock] = Field(default_factory=list)
    budget: int | None = Field(default=None, description="Tokens the prompt may use")
    tokenizer: str | None = Field(
        default=None, description="Which tokenizer counted the blocks' tokens"
    )
    warnings: list[str] = Field(default_factory=list)
    scripts: list[ScriptRun] = Field(
        default_factory=list, description="The chat:Script runs of this prompt, in order"
    )

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json")
        return data
