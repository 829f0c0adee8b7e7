"""Global activation settings: SillyTavern's World Info settings, per project.

Names follow storyloom's style; SillyTavern's names are in the descriptions so an imported
``settings.json`` maps one to one. Entries may override ``case_sensitive``,
``match_whole_words``, ``scan_depth`` and ``use_group_scoring``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

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
    semantic_threshold_default: float = Field(
        default=0.75, ge=0, le=1, description="Similarity needed by semantic entries"
    )
