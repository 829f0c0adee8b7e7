"""SillyTavern chat-completion presets (``default/content/presets/openai/*.json``) as chat
pipeline workflows (seed 000 §7).

A preset is a prompt layout (``prompts`` and ``prompt_order``), a few texts beside it
(new chat, example chat, continue nudge, formats) and sampling parameters. All of it
has a home in the pipeline: the layout in the Skein Builder, the context size and the
reply reserve in the Token Budget, the names behaviour and system squashing in the
Weaver, the sampling in the LLM Invoker. Importing gives the default pipeline graph
with those nodes configured, ready to save under ``workflows/`` and pick per
conversation.

``prompt_order`` holds one order per character; SillyTavern's "global" strategy uses the
dummy character 100001 and older presets 100000, so that is the order taken (else the
first). Presets from before the prompt manager (``main_prompt``, ``nsfw_prompt``,
``jailbreak_prompt``) import too. Anything that does not fit (a string temperature, a
prompt without an identifier) is refused with every field named; nothing is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storyloom.chat.prompt.default_pipeline import pipeline_workflow
from storyloom.chat.prompt.skein_builder import DEFAULT_PROMPT_ORDER, DEFAULT_PROMPTS
from storyloom.chat.prompt.weaver import ST_NAMES_BEHAVIOR
from storyloom.core.errors import FieldProblem, FileFormatError, problems_from_validation
from storyloom.workflow.workflow_file import Workflow

GLOBAL_ORDER_IDS = (100001, 100000)
"""``character_id`` of the global prompt order: current SillyTavern, then older."""

_LEGACY_PROMPTS = {"main_prompt": "main", "nsfw_prompt": "nsfw", "jailbreak_prompt": "jailbreak"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class StPrompt(_Strict):
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


class StOrderEntry(_Strict):
    identifier: str = Field(min_length=1)
    enabled: bool = True


class StPromptOrder(_Strict):
    character_id: int
    order: list[StOrderEntry]


class StPreset(_Strict):
    """The fields of a chat-completion preset storyloom uses; the rest are kept aside."""

    prompts: list[StPrompt] | None = None
    prompt_order: list[StPromptOrder] | None = None
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


def _read(path_or_data: Path | str | Mapping[str, Any], name: str | None) -> tuple[Any, Path]:
    if not isinstance(path_or_data, str | Path):
        return path_or_data, Path(f"{name or 'preset'}.json")
    path = Path(path_or_data)
    try:
        return json.loads(path.read_text(encoding="utf-8")), path
    except FileNotFoundError:
        raise FileFormatError(path, [FieldProblem("", "no such file")]) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FileFormatError(path, [FieldProblem("", f"not JSON: {exc}")]) from None


def workflow_id_for(name: str) -> str:
    """A workflow id (the file name) for a preset name: ``st-<name as letters/digits>``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")
    return f"st-{slug[:120] or 'preset'}".lower()


def import_st_preset(
    path_or_data: Path | str | Mapping[str, Any],
    *,
    name: str | None = None,
    workflow_id: str | None = None,
) -> Workflow:
    """The chat pipeline workflow of a SillyTavern chat-completion preset.

    ``name`` (default: the file's stem) names the workflow; its id is
    ``workflow_id`` or ``st-<name>``. Raises :class:`FileFormatError` naming every field
    that does not fit.
    """
    data, source = _read(path_or_data, name)
    name = name or source.stem
    if not isinstance(data, dict):
        raise FileFormatError(
            source, [FieldProblem("", f"expected a JSON object, got {type(data).__name__}")]
        )
    try:
        preset = StPreset.model_validate(data)
    except ValidationError as exc:
        raise FileFormatError(source, problems_from_validation(exc)) from None
    order = _order(preset)

    builder: dict[str, Any] = {"prompts": _prompts(preset), "prompt_order": order}
    for key in (
        "new_chat_prompt",
        "new_example_chat_prompt",
        "continue_nudge_prompt",
        "impersonation_prompt",
        "wi_format",
        "scenario_format",
        "personality_format",
    ):
        value = getattr(preset, key)
        if value is not None:
            builder[key] = value
    budget: dict[str, Any] = {}
    if preset.openai_max_context is not None:
        budget["max_context_tokens"] = preset.openai_max_context
    if preset.openai_max_tokens is not None:
        budget["reserve_tokens"] = preset.openai_max_tokens
    weaver: dict[str, Any] = {}
    if preset.names_behavior is not None:
        weaver["names_behavior"] = ST_NAMES_BEHAVIOR[preset.names_behavior]
    if preset.squash_system_messages is not None:
        weaver["squash_system"] = preset.squash_system_messages
    invoker: dict[str, Any] = {
        key: value
        for key, value in (
            ("temperature", preset.temperature),
            ("top_p", preset.top_p),
            ("frequency_penalty", preset.frequency_penalty),
            ("presence_penalty", preset.presence_penalty),
            ("max_tokens", preset.openai_max_tokens),
        )
        if value is not None
    }
    if preset.seed is not None and preset.seed >= 0:  # -1: a random seed each time
        invoker["seed"] = preset.seed
    for key in ("temperature", "top_p", "frequency_penalty", "presence_penalty"):
        if key in invoker:
            invoker[key] = float(invoker[key])
    return pipeline_workflow(
        workflow_id or workflow_id_for(name),
        name=name,
        description=f"Chat pipeline imported from the SillyTavern preset {name!r}.",
        config={"builder": builder, "budget": budget, "weaver": weaver, "invoker": invoker},
        extra={
            "importedFrom": {
                "format": "sillytavern-chat-completion-preset",
                "file": str(source.name),
            }
        },
    )


def _prompts(preset: StPreset) -> list[dict[str, Any]]:
    defaults = {p.identifier: p for p in DEFAULT_PROMPTS}
    prompts: list[dict[str, Any]] = []
    if preset.prompts is None:
        for key, identifier in _LEGACY_PROMPTS.items():
            text = getattr(preset, key)
            if text is not None:
                prompts.append(
                    defaults[identifier].model_copy(update={"content": text}).model_dump()
                )
        return prompts
    for prompt in preset.prompts:
        base = defaults.get(prompt.identifier)
        values = prompt.model_dump(exclude_none=True)
        merged = {**(base.model_dump() if base else {}), **values}
        merged.setdefault("role", "system")
        merged.setdefault("content", "")
        prompts.append(merged)
    return prompts


def _order(preset: StPreset) -> list[dict[str, Any]]:
    """The global prompt order (see the module docstring); an identifier it names that no
    prompt has is kept, and the Skein Builder reports it when it runs."""
    if not preset.prompt_order:
        return [entry.model_dump() for entry in DEFAULT_PROMPT_ORDER]
    by_id = {order.character_id: order for order in preset.prompt_order}
    chosen = next((by_id[cid] for cid in GLOBAL_ORDER_IDS if cid in by_id), preset.prompt_order[0])
    return [{"identifier": e.identifier, "enabled": e.enabled} for e in chosen.order]
