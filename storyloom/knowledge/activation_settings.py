"""Global activation settings: SillyTavern's World Info settings, per project.

Names follow storyloom's style; SillyTavern's names are in the descriptions so an imported
``settings.json`` maps one to one. Entries may override ``case_sensitive``,
``match_whole_words``, ``scan_depth`` and ``use_group_scoring``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from storyloom.knowledge.activation_calibration import DEFAULT_THRESHOLD

InsertionStrategy = Literal["evenly", "character_first", "global_first"]

#: Deepest scan SillyTavern allows (``MAX_SCAN_DEPTH``); deeper settings are cut to it.
MAX_SCAN_DEPTH = 1000


class ActivationSettings(BaseModel):
    """How the activation engine scans; entries may override some of these."""

    model_config = ConfigDict(extra="allow")

    scan_depth: int = Field(
        default=2, ge=0, description="Messages scanned, newest first (world_info_depth)"
    )
    context_percent: int = Field(
        default=25,
        ge=1,
        le=100,
        description="Budget as a percent of the context window (world_info_budget)",
    )
    budget_cap: int = Field(
        default=0, ge=0, description="Most tokens for lore; 0: no cap (world_info_budget_cap)"
    )
    min_activations: int = Field(
        default=0,
        ge=0,
        description="Scan deeper until this many entries are active (world_info_min_activations)",
    )
    min_activations_depth_max: int = Field(
        default=0,
        ge=0,
        description="Deepest scan for min_activations; 0: the whole chat "
        "(world_info_min_activations_depth_max)",
    )
    max_recursion_steps: int = Field(
        default=0,
        ge=0,
        description="Most scan passes, the first included; 0: unlimited "
        "(world_info_max_recursion_steps)",
    )
    recursive: bool = Field(
        default=True, description="Active entries' text activates others (world_info_recursive)"
    )
    case_sensitive: bool = Field(default=False, description="world_info_case_sensitive")
    match_whole_words: bool = Field(default=False, description="world_info_match_whole_words")
    use_group_scoring: bool = Field(default=False, description="world_info_use_group_scoring")
    include_names: bool = Field(
        default=True, description="Scan 'Name: message' lines (world_info_include_names)"
    )
    overflow_alert: bool = Field(
        default=False,
        description="Tell the user when the budget cut entries (world_info_overflow_alert)",
    )
    insertion_strategy: InsertionStrategy = Field(
        default="evenly",
        description="How global and character lore are ordered for the scan and the budget: "
        "as one list by priority, character books first, or global books first; chat and "
        "persona lore always come first (world_info_character_strategy)",
    )
    semantic_threshold_default: float = Field(
        default=DEFAULT_THRESHOLD,
        ge=0,
        le=1,
        description="Calibrated similarity needed by semantic entries (0: no closer than "
        "idle talk; see docs/knowledge.md, calibration)",
    )


class _HasText(Protocol):
    @property
    def text(self) -> str: ...


#: Most characters of chat semantic activation embeds (the newest): about the 512 tokens
#: an e5 model reads, and embedding time grows with the square of the length.
MAX_WINDOW_CHARS = 2000


def scan_window_text(messages: Sequence[_HasText], settings: ActivationSettings) -> str:
    """The text semantic activation embeds: the newest ``scan_depth`` messages, oldest
    first, one per line, at most :data:`MAX_WINDOW_CHARS` (the newest). Never the whole
    chat: a long chat would cost every scan."""
    depth = min(settings.scan_depth, MAX_SCAN_DEPTH)
    window = messages[-depth:] if depth else []
    return "\n".join(m.text for m in window).strip()[-MAX_WINDOW_CHARS:].strip()
