"""SillyTavern chat-completion presets as chat pipeline workflows (seed 000 §7).

The preset file itself (its fields, reading and checking it) is
:mod:`storyloom.sillytavern.completion_preset`; this module decides where each part goes.
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

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from storyloom.chat.prompt.default_pipeline import pipeline_workflow
from storyloom.chat.prompt.skein_builder import DEFAULT_PROMPT_ORDER, DEFAULT_PROMPTS
from storyloom.chat.prompt.weaver import ST_NAMES_BEHAVIOR
from storyloom.sillytavern.completion_preset import (
    LEGACY_PROMPT_FIELDS,
    CompletionPreset,
    read_completion_preset,
)
from storyloom.workflow.workflow_file import Workflow


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
    preset, source = read_completion_preset(path_or_data, name=name)
    name = name or source.stem
    order = _order(preset)

    # A SillyTavern preset brings its own instructions (often its own output format):
    # the format guide would fight them, so it is the user's to turn on.
    builder: dict[str, Any] = {
        "prompts": _prompts(preset),
        "prompt_order": order,
        "format_guide": False,
    }
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


def _prompts(preset: CompletionPreset) -> list[dict[str, Any]]:
    defaults = {p.identifier: p for p in DEFAULT_PROMPTS}
    prompts: list[dict[str, Any]] = []
    if preset.prompts is None:
        for key, identifier in LEGACY_PROMPT_FIELDS.items():
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


def _order(preset: CompletionPreset) -> list[dict[str, Any]]:
    """The global prompt order (see the module docstring); an identifier it names that no
    prompt has is kept, and the Skein Builder reports it when it runs."""
    chosen = preset.global_order()
    if chosen is None:
        return [entry.model_dump() for entry in DEFAULT_PROMPT_ORDER]
    return [{"identifier": e.identifier, "enabled": e.enabled} for e in chosen.order]
