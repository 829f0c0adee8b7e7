"""A conversation: its tree of messages lives in SQLite; this is its header row."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from storyloom.chat.store.group import GroupSettings
from storyloom.sillytavern.tavern_helper import helper_scripts

DEFAULT_PIPELINE = "chat-default"
"""Id of the built-in chat pipeline workflow (see :mod:`storyloom.chat.prompt.default_pipeline`)."""


class CharacterSnapshot(BaseModel):
    """PersonaLab's ``character_snapshot.json`` (seed 004) plus the card it came from.

    Copied from the character preset when the conversation is created; editing the preset
    later does not change it. ``base_persona`` never changes; ``evolved_persona`` grows
    when the user accepts an "update memory".
    """

    model_config = ConfigDict(extra="allow")

    source_preset: str | None = None
    snapshot_created_at: str = ""
    base_persona: str = ""
    evolved_persona: str = ""
    card: dict[str, Any] = Field(
        default_factory=dict,
        description="The character preset as it was (CharacterDefinition JSON: name, "
        "description, personality, scenario, first_mes, mes_example, system_prompt, "
        "post_history_instructions, extensions incl. regex_scripts and depth_prompt...)",
    )

    def text(self, key: str) -> str:
        """A text field of the card ("" when missing or not text: cards are loose)."""
        value = self.card.get(key)
        return value if isinstance(value, str) else ""


class BackgroundSnapshot(BaseModel):
    """A copy of the background preset (world setting and optional story outline)."""

    model_config = ConfigDict(extra="allow")

    source_preset: str | None = None
    name: str = ""
    world_setting: str = ""
    story_outline: list[dict[str, Any]] = Field(
        default_factory=list, description="[{index, content}] 1-based; empty: no director"
    )


class RagScope(BaseModel):
    model_config = ConfigDict(extra="allow")

    mode: Literal["self_only", "related"] = "self_only"
    related_conversations: list[str] = Field(default_factory=list)


class ConversationSettings(BaseModel):
    """What a conversation is run with. Unknown keys are kept."""

    model_config = ConfigDict(extra="allow")

    pipeline: str = Field(default=DEFAULT_PIPELINE, description="Chat pipeline workflow id")
    user_name: str = "User"
    persona: str = Field(default="", description="The user's persona description")
    persona_id: str | None = Field(
        default=None,
        description="The persona this chat speaks as (None: the project's default persona; "
        "without one, user_name and persona above)",
    )
    authors_note: str = ""
    authors_note_depth: int = Field(default=4, ge=0)
    allow_regex_scripts: bool = Field(
        default=False, description="The user allowed the character card's regex scripts"
    )
    allow_html_scripts: bool = Field(
        default=False, description="Scripts may run in the HTML the chat renders (iframe)"
    )
    director_enabled: bool = True
    rag_fallback_threshold: int = Field(default=3, ge=1)
    rag_scope: RagScope = Field(default_factory=RagScope)
    summaries: list[str] = Field(
        default_factory=list, description="Summary preset ids this conversation starts from"
    )
    knowledge_bases: list[str] = Field(
        default_factory=list,
        description="kb_ids of the books bound to this chat (chat lore), besides the "
        "project's global books, the character's and the persona's",
    )
    keyframe_every: int = Field(default=32, ge=1, description="State keyframe interval")
    group: GroupSettings | None = Field(
        default=None, description="A group chat's members and turn order (None: one character)"
    )
    format_guide: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Tell the model the Filament format (<thought>, <state_update>, "
        "<reply>) and show it the state: on, off, or auto (on unless the card turns it off "
        "or brings its own update rules, as MVU cards do)",
    )
    format_guide_text: str = Field(
        default="",
        description="Replaces the built-in format guide ({state}: the variables as JSON)",
    )
    agent_profile: str | None = Field(
        default=None,
        description="The agent profile (agents/<id>.json) the character answers with, tools "
        "and all; None: the one the user confirmed for the character on its page (a card's "
        "extensions.storyloom.agent_profile is only a suggestion); '': no agent at all",
    )
    connection: str | None = Field(
        default=None,
        description="The named connection (settings.json connections) that writes this "
        "chat's replies, over the character's (its card's extensions.storyloom.connection); "
        "None: the character's, else the user model",
    )
    background: str | None = Field(
        default=None,
        description="The image shown behind this chat: a file name in the data directory's "
        "backgrounds/ (SillyTavern's chat_metadata.custom_background); None: none",
    )
    expression: str | None = Field(
        default=None,
        description="The character's expression sprite this chat shows (a label of its "
        "sprites, picked by hand); None: the character's default sprite",
    )
    mvu_updater: bool = Field(
        default=False,
        description="MVU's separate updater: lore entries named [mvu_update] leave the "
        "reply's prompt and go, with the reply, to the agent model, whose update blocks "
        "change the state (off: both go to the reply's prompt, as MVU's default)",
    )


class Conversation(BaseModel):
    """A conversation's header; ``version`` grows with every write (versioned writes)."""

    model_config = ConfigDict(frozen=True)

    id: str
    project_id: str
    title: str
    created_at: float
    updated_at: float
    pointer: str | None = Field(description="The message the user is at (None: empty chat)")
    version: int = Field(ge=0)
    character: CharacterSnapshot = Field(default_factory=CharacterSnapshot)
    background: BackgroundSnapshot | None = None
    settings: ConversationSettings = Field(default_factory=ConversationSettings)
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Imported chat_metadata and other kept data"
    )


class CardMacros(TypedDict):
    char: str
    user: str
    description: str
    personality: str
    scenario: str
    persona: str
    character_variables: dict[str, Any]


def card_macros(character: CharacterSnapshot, settings: ConversationSettings) -> CardMacros:
    """The values of ``{{char}}``, ``{{user}}``, ``{{description}}``, ``{{personality}}``,
    ``{{scenario}}`` and ``{{persona}}`` for a conversation."""
    return CardMacros(
        # Character Card V3: a nickname stands for {{char}} (and <char>, <bot>) in prompts.
        char=character.text("nickname").strip() or character.text("name"),
        user=settings.user_name,
        description=character.text("description"),
        personality=character.text("personality"),
        scenario=character.text("scenario"),
        persona=settings.persona,
        # Tavern Helper's character variables ({{get_character_variable::x}})
        character_variables=helper_scripts(character.card).variables,
    )
