"""The CAIU entry (Curated Atomic Info Unit), seed 000 section 2.2.1.

Every field of the seed is here under its seed name. The World Info behaviours that the
seed leaves open (secondary keys, recursion flags, timed effects, inclusion groups,
placements at depth...) are typed fields of ``activation_criteria`` and ``usage_metadata``,
so the editor and the activation engine share one definition. Every model keeps fields it
does not know (``extra="allow"``), so a file written by a newer storyloom or by hand
survives a load and save unchanged.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The longest key (keyword or ``/regex/flags``) an entry may have. Real keys are names and
#: phrases (the longest in the SillyTavern samples is 16 characters; a long regex
#: alternation a few hundred): the limit is far above them and far below what the
#: keyword automaton's C code can build without overflowing its stack (~500,000).
MAX_KEY_CHARS = 2000

# The editor validates entries against the JSON schema: it gets the limit as maxLength.
_KEYS_SCHEMA: dict[str, Any] = {"items": {"type": "string", "maxLength": MAX_KEY_CHARS}}


def _check_key_lengths(keys: list[str]) -> list[str]:
    for index, key in enumerate(keys):
        if len(key) > MAX_KEY_CHARS:
            raise ValueError(
                f"key {index} has {len(key)} characters; a key has at most {MAX_KEY_CHARS}"
            )
    return keys


class _Open(BaseModel):
    """Base of every file model: unknown fields are kept and written back."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def new_entry_id() -> str:
    return f"caiu_{uuid.uuid4().hex}"


class Content(_Open):
    """What the entry says: text, or a media file with a textual stand-in."""

    mime_type: str = Field(
        default="text/plain",
        description='e.g. "text/plain", "text/markdown", "image/png", '
        '"application/json+comfytavern-variable-definition"',
    )
    value: str | None = Field(
        default="", description="The text; for media, a description that can be injected"
    )
    path: str | None = Field(
        default=None, description='Media file relative to the KB folder, e.g. "media/dragon.png"'
    )
    url: str | None = Field(default=None, description="Remote media, where allowed")
    alt_text: str | None = Field(default=None, description="Alternative text of an image")
    caption: str | None = Field(default=None, description="Caption of the media")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Extra data of this content, e.g. image size"
    )

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return value
        parts = value.replace("\\", "/").split("/")
        if value.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise ValueError("must be a path inside the knowledge base folder, like media/x.png")
        return value


class KeyGroup(_Open):
    """Keys that count together: AND needs every key, OR any one of them."""

    group_id: str = Field(default="", description="Name of the group, for reasons and editing")
    keys: list[str] = Field(
        default_factory=list, description="Keywords or /regex/flags", json_schema_extra=_KEYS_SCHEMA
    )
    logic: Literal["AND", "OR"] = Field(default="AND", description="AND: all keys; OR: any key")

    check_key_lengths = field_validator("keys")(_check_key_lengths)


ConditionOperator = Literal[
    "equals",
    "not_equals",
    "greater_than",
    "greater_or_equal",
    "less_than",
    "less_or_equal",
    "contains",
    "not_contains",
    "exists",
    "not_exists",
]


class TriggerCondition(_Open):
    """A rule on a chat variable that must hold for the entry to activate."""

    type: Literal["variable_check"] = Field(default="variable_check")
    variable: str = Field(description="Variable name; dots reach into objects (stats.hp)")
    operator: ConditionOperator = Field(default="equals")
    value: Any = Field(default=None, description="Compared with the variable's value")


class SecondaryLogic(StrEnum):
    """How secondary keys combine with a primary match (SillyTavern's selectiveLogic)."""

    AND_ANY = "AND_ANY"
    NOT_ALL = "NOT_ALL"
    NOT_ANY = "NOT_ANY"
    AND_ALL = "AND_ALL"


ScanSource = Literal[
    "persona_description",
    "character_description",
    "character_personality",
    "character_depth_prompt",
    "scenario",
    "creator_notes",
]


class CharacterFilter(_Open):
    """Limit an entry to (or away from) some characters or character tags."""

    names: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    is_exclude: bool = Field(default=False, description="True: every character but these")


GenerationType = Literal["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]


class ActivationCriteria(_Open):
    """When the entry enters a prompt."""

    keywords: list[str] = Field(
        default_factory=list,
        description="Primary keys; any one matches. /regex/flags allowed",
        json_schema_extra=_KEYS_SCHEMA,
    )
    key_groups: list[KeyGroup] = Field(
        default_factory=list,
        description="Groups of keys with their own AND/OR logic; any satisfied group matches",
    )
    use_semantic_search: bool = Field(
        default=False, description="Also activate by meaning (vector + keyword search)"
    )
    semantic_threshold: float | None = Field(
        default=None, ge=0, le=1, description="Minimum similarity for semantic activation"
    )
    trigger_conditions: list[TriggerCondition] = Field(
        default_factory=list, description="Variable rules; all must hold"
    )
    trigger_probability: float = Field(
        default=1.0, ge=0, le=1, description="Chance to activate once matched (seeded per turn)"
    )
    # World Info behaviours the seed leaves to the implementation.
    constant: bool = Field(default=False, description="Always active (still subject to rules)")
    never_activate: bool = Field(
        default=False,
        description="A scan never activates it (keys, constant, sticky, similarity); "
        "{{{references}}} still reach it. Character Card V3's @@dont_activate",
    )
    secondary_keywords: list[str] = Field(
        default_factory=list,
        description="Optional filter keys combined by secondary_logic",
        json_schema_extra=_KEYS_SCHEMA,
    )
    secondary_logic: SecondaryLogic = Field(default=SecondaryLogic.AND_ANY)
    check_key_lengths = field_validator("keywords", "secondary_keywords")(_check_key_lengths)
    selective: bool = Field(
        default=True, description="Use secondary keys (SillyTavern's 'selective')"
    )
    case_sensitive: bool | None = Field(default=None, description="None: the global setting")
    match_whole_words: bool | None = Field(
        default=None, description="None: the global setting. CJK keys always match as substrings"
    )
    scan_depth: int | None = Field(
        default=None, ge=0, description="Messages to scan; None: the global setting"
    )
    also_scan: list[ScanSource] = Field(
        default_factory=list, description="Character/persona fields scanned with the chat"
    )
    exclude_recursion: bool = Field(
        default=False, description="Not activated by text of other entries"
    )
    prevent_recursion: bool = Field(
        default=False, description="Its text does not activate other entries"
    )
    delay_until_recursion: int = Field(
        default=0, ge=0, description="0: no; n: only from recursion level n on"
    )
    sticky: int = Field(default=0, ge=0, description="Stays active for n messages once active")
    cooldown: int = Field(
        default=0, ge=0, description="Cannot activate for n messages after it was active"
    )
    delay: int = Field(default=0, ge=0, description="Cannot activate before n messages exist")
    inclusion_groups: list[str] = Field(
        default_factory=list, description="Of active entries sharing a group, one is kept"
    )
    group_override: bool = Field(
        default=False, description="Wins its group by priority instead of by weight"
    )
    group_weight: int = Field(default=100, ge=1, description="Chance weight inside its group")
    use_group_scoring: bool | None = Field(
        default=None, description="Keep only the group members with most matched keys"
    )
    character_filter: CharacterFilter | None = Field(default=None)
    generation_triggers: list[GenerationType] = Field(
        default_factory=list, description="Only for these generation types; empty: all"
    )


class Placement(StrEnum):
    """Where an activated entry goes in the prompt."""

    BEFORE_PROMPT = "before_prompt"
    AFTER_PROMPT = "after_prompt"
    SYSTEM_CONTEXT = "system_context"
    SCRATCHPAD_NOTES = "scratchpad_notes"
    BEFORE_CHARACTER = "before_character"
    AFTER_CHARACTER = "after_character"
    AUTHORS_NOTE_TOP = "authors_note_top"
    AUTHORS_NOTE_BOTTOM = "authors_note_bottom"
    AT_DEPTH = "at_depth"
    EXAMPLES_TOP = "examples_top"
    EXAMPLES_BOTTOM = "examples_bottom"
    OUTLET = "outlet"


class Affix(_Open):
    text: str = Field(default="")
    is_enabled: bool = Field(default=False)


class UsageMetadata(_Open):
    """How an active entry is inserted."""

    priority: int = Field(
        default=100,
        description="Higher is more important: kept first under the budget, inserted later",
    )
    placement: Placement = Field(default=Placement.BEFORE_PROMPT)
    token_budget_impact: int | Literal["critical"] | None = Field(
        default=None, description='Token estimate, or "critical": always included, outside budget'
    )
    once_per_session: bool = Field(default=False, description="Activates once per conversation")
    exclude_from_history: bool = Field(
        default=False,
        description="Injected for one turn only: no sticky effect carries it into later turns",
    )
    prefix: Affix = Field(default_factory=Affix)
    suffix: Affix = Field(default_factory=Affix)
    depth: int = Field(default=4, ge=0, description="With at_depth: messages from the end")
    role: Literal["system", "user", "assistant"] = Field(
        default="system", description="With at_depth: the message role"
    )
    outlet_name: str = Field(default="", description="With outlet: the outlet's name")

    @property
    def ignores_budget(self) -> bool:
        return self.token_budget_impact == "critical"


class ManagementMetadata(_Open):
    tags: list[str] = Field(
        default_factory=list, description='Free tags; "@ref" marks a referenceable entry'
    )
    source: str = Field(
        default="manual_entry",
        description='"manual_entry", "agent_generated", "st_import_v1", ...',
    )
    created_at: str | None = Field(default=None, description="ISO timestamp")
    updated_at: str | None = Field(default=None, description="ISO timestamp")
    author_notes: str = Field(default="")
    editor_description: str = Field(default="", description="Shown in the editor only")
    is_enabled: bool = Field(default=True)
    child_ids: list[str] = Field(
        default_factory=list, description="Children of a group entry, in order"
    )
    related_ids: list[str] = Field(default_factory=list, description="Related, not nested")


class VariableHandling(_Open):
    defines_variables: dict[str, Any] = Field(
        default_factory=dict, description="Variables this entry sets when active"
    )
    uses_variables_in_content: list[str] = Field(
        default_factory=list, description="{{name}} placeholders its content uses"
    )


# Sequences of the reference syntax (:mod:`storyloom.knowledge.reference_syntax`) a display
# name may not hold, or ``{{{name}}}`` would parse as something else (seed 000 2.2.4).
DISPLAY_NAME_FORBIDDEN: tuple[str, ...] = ("/", "{{{", "}}}", "this:", "id=")
# ``{{{tag:x}}}`` is the tag form and ``{{{system:x}}}`` is never a reference.
DISPLAY_NAME_FORBIDDEN_PREFIXES: tuple[str, ...] = ("tag:", "system:")


class CAIU(_Open):
    """One knowledge entry."""

    id: str = Field(default_factory=new_entry_id, min_length=1, description="Unique in its KB")
    version: int = Field(default=1, ge=1, description="Version of this entry's structure")
    entry_type: str = Field(
        default="lore_detail",
        description='"fact", "lore_detail", "character_definition", "instruction", '
        '"group_container", ...',
    )
    displayName: str | None = Field(
        default=None,
        description="Name used by {{{references}}}; no '/', '{{{', '}}}', 'this:', 'id=' in it",
    )
    content: Content = Field(default_factory=Content)
    activation_criteria: ActivationCriteria = Field(default_factory=ActivationCriteria)
    usage_metadata: UsageMetadata = Field(default_factory=UsageMetadata)
    management_metadata: ManagementMetadata = Field(default_factory=ManagementMetadata)
    variable_handling: VariableHandling = Field(default_factory=VariableHandling)
    extensions: dict[str, Any] = Field(
        default_factory=dict, description="Plugin data; SillyTavern fields kept for export"
    )

    @field_validator("displayName")
    @classmethod
    def _reference_safe(cls, value: str | None) -> str | None:
        if value:
            bad = [marker for marker in DISPLAY_NAME_FORBIDDEN if marker in value]
            if bad:
                listed = ", ".join(repr(m) for m in bad)
                raise ValueError(
                    f"must not contain {listed}: '/', '{{{{{{', '}}}}}}', 'this:' and 'id=' are "
                    "reference syntax (seed 000 2.2.4), so {{{name}}} could not reach this entry"
                )
            head = value.strip()
            for prefix in DISPLAY_NAME_FORBIDDEN_PREFIXES:
                if head.startswith(prefix):
                    raise ValueError(
                        f"must not start with {prefix!r}: {{{{{{{prefix}...}}}}}} is another "
                        "reference form (seed 000 2.2.4), so no reference could reach this entry"
                    )
            if "\n" in value or "\r" in value:
                raise ValueError("must be one line: a {{{reference}}} never spans lines")
        return value

    @property
    def is_group(self) -> bool:
        return bool(self.management_metadata.child_ids) or self.entry_type == "group_container"

    @property
    def text(self) -> str:
        """What the prompt gets: the content's text; for media without one, its alt text
        or caption (the stand-in a model without vision is sent)."""
        content = self.content
        if content.value:
            return content.value
        if content.path or content.url:
            return content.alt_text or content.caption or ""
        return ""
