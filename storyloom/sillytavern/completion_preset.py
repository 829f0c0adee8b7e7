"""SillyTavern's chat-completion preset files (``default/content/presets/openai/*.json``).

A preset holds a prompt layout (``prompts`` and ``prompt_order``), a few texts beside it
(new chat, example chat, continue nudge, formats) and sampling parameters. The models
type the fields storyloom reads, strictly (a string temperature is refused, not
coerced); every other field is kept as it is.

``prompt_order`` holds one order per character; SillyTavern's "global" strategy uses the
dummy character 100001 and older presets 100000 (:meth:`CompletionPreset.global_order`).
Presets from before the prompt manager have no ``prompts``; their texts are in
``main_prompt``, ``nsfw_prompt`` and ``jailbreak_prompt`` (:data:`LEGACY_PROMPT_FIELDS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.sillytavern.untrusted_json import UntrustedJsonError, loads_untrusted

GLOBAL_ORDER_IDS = (100001, 100000)
"""``character_id`` of the global prompt order: current SillyTavern, then older."""

LEGACY_PROMPT_FIELDS: dict[str, str] = {
    "main_prompt": "main",
    "nsfw_prompt": "nsfw",
    "jailbreak_prompt": "jailbreak",
}
"""A pre-prompt-manager field -> the identifier of the prompt that replaced it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class PresetPrompt(_Strict):
    """One item of ``prompts``: a text block, or a marker the prompt manager fills."""

    identifier: str = Field(min_length=1)
    name: str | None = None
    role: Literal["system", "user", "assistant"] | None = None

    @field_validator("role", mode="before")
    @classmethod
    def _empty_role(cls, value: Any) -> Any:
        return None if value == "" else value

    content: str | None = None
    system_prompt: bool | None = None
    marker: bool | None = None
    injection_position: Literal[0, 1] | None = None
    injection_depth: int | None = Field(default=None, ge=0)
    injection_order: int | None = None
    forbid_overrides: bool | None = None


class PromptOrderEntry(_Strict):
    identifier: str = Field(min_length=1)
    enabled: bool = True


class PromptOrder(_Strict):
    """The order and switches of the prompts for one character (or the global one)."""

    character_id: int
    order: list[PromptOrderEntry]


class CompletionPreset(_Strict):
    """The fields of a chat-completion preset storyloom reads; the rest are kept aside."""

    prompts: list[PresetPrompt] | None = None
    prompt_order: list[PromptOrder] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    openai_max_tokens: int | None = Field(default=None, ge=1)
    openai_max_context: int | None = Field(default=None, ge=1)
    seed: int | None = None
    names_behavior: Literal[-1, 0, 1, 2] | None = None
    squash_system_messages: bool | None = None
    new_chat_prompt: str | None = None
    new_example_chat_prompt: str | None = None
    continue_nudge_prompt: str | None = None
    impersonation_prompt: str | None = None
    wi_format: str | None = None
    scenario_format: str | None = None
    personality_format: str | None = None
    main_prompt: str | None = None
    nsfw_prompt: str | None = None
    jailbreak_prompt: str | None = None

    def global_order(self) -> PromptOrder | None:
        """The order SillyTavern's global strategy uses (else the first); None if none."""
        if not self.prompt_order:
            return None
        by_id = {order.character_id: order for order in self.prompt_order}
        return next((by_id[cid] for cid in GLOBAL_ORDER_IDS if cid in by_id), self.prompt_order[0])


def read_completion_preset(
    path_or_data: Path | str | Mapping[str, Any], *, name: str | None = None
) -> tuple[CompletionPreset, Path]:
    """A preset from its file, or from JSON already parsed, and the path it came from.

    Parsed data gets the path ``<name>.json`` (``preset.json`` without a name), which
    error messages and callers naming the preset by its file use. Raises
    :class:`FileFormatError` naming every field that does not fit.
    """
    if isinstance(path_or_data, str | Path):
        source = Path(path_or_data)
        try:
            data: Any = loads_untrusted(source.read_bytes())
        except FileNotFoundError:
            raise FileFormatError(source, [FieldProblem("", "no such file")]) from None
        except OSError as exc:
            raise FileFormatError(source, [FieldProblem("", f"cannot read: {exc}")]) from None
        except UntrustedJsonError as exc:
            raise FileFormatError(source, [FieldProblem(exc.where, exc.reason)]) from None
    else:
        data, source = path_or_data, Path(f"{name or 'preset'}.json")
    if not isinstance(data, dict):
        raise FileFormatError(
            source, [FieldProblem("", f"expected a JSON object, got {type(data).__name__}")]
        )
    try:
        return CompletionPreset.model_validate(data), source
    except ValidationError as exc:
        raise FileFormatError(source, problems_from_validation(exc)) from None
