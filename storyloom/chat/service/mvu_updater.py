"""MVU's separate updater ("extra model" mode): the state update asked of the agent model.

With the chat's ``mvu_updater`` setting on, the lore entries named ``[mvu_update]`` (the
card's update rules and output format) stay out of the reply's prompt
(:func:`~storyloom.chat.prompt.skein_builder.prompt_lore`); once the reply is written,
the agent model (:meth:`Settings.agent_model`, the chat model when none is set up) gets
those entries, the current ``stat_data`` as YAML and the reply, and its answer's update
blocks (``<UpdateVariable>``, ``<JSONPatch>``, ``_.set``) are applied to the reply's
state with MVU's rules. ``[mvu_plot]`` entries stay in the reply's prompt. The reply's
own update blocks, if it wrote any, are applied first, as before.

A failed call (no agent model, the endpoint down, an empty answer) keeps the reply and
its state as the reply left them and adds an ``updater`` warning to the message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from storyloom.chat.prompt.helper_variables import format_text, without_dollar_keys
from storyloom.chat.prompt.macros import MacroContext, expand_macros
from storyloom.chat.prompt.skein_builder import mvu_update_lore
from storyloom.chat.reply.filament import FilamentTags, parse_filament
from storyloom.chat.reply.mvu import STAT_DATA
from storyloom.chat.reply.mvu_values import MvuWarning, apply_mvu_ops
from storyloom.chat.store.conversation import card_macros
from storyloom.chat.store.snapshot import ContextSnapshot
from storyloom.core.settings import ChatEndpoint
from storyloom.llm.chat import ChatClient
from storyloom.sillytavern.mvu_zod import ZodSchemaError, card_state_schema

logger = logging.getLogger(__name__)

UPDATER_INSTRUCTION = (
    "You update the story's variables. Read the rules above, the current variables and "
    "the latest reply, and answer only with the update commands the rules ask for "
    "(in <UpdateVariable>…</UpdateVariable>). Write no story text."
)


def updater_messages(
    snapshot: ContextSnapshot, variables: Mapping[str, Any], reply: str
) -> list[dict[str, Any]] | None:
    """The agent model's prompt, or None when the chat has no ``[mvu_update]`` lore."""
    hits = mvu_update_lore(snapshot)
    if not hits:
        return None
    context = MacroContext(
        **card_macros(snapshot.character, snapshot.settings),
        variables=dict(variables),
        global_variables=dict(snapshot.global_variables),
    )
    rules = "\n\n".join(expand_macros(hit.content, context).strip() for hit in hits)
    current = format_text(without_dollar_keys(variables.get(STAT_DATA) or {}))
    user = (
        f"<current_variables>\n{current}\n</current_variables>\n\n"
        f"<latest_reply>\n{reply}\n</latest_reply>\n\n{UPDATER_INSTRUCTION}"
    )
    return [{"role": "system", "content": rules}, {"role": "user", "content": user}]


async def run_updater(
    endpoint: ChatEndpoint | Exception, snapshot: ContextSnapshot, outputs: Mapping[str, Any]
) -> dict[str, Any]:
    """The pipeline's ``outputs`` with the agent model's updates applied to ``state`` and
    its problems and warnings added (``endpoint`` an exception: no agent model)."""
    out = dict(outputs)
    state = out.get("state")
    reply = out.get("reply")
    if not isinstance(state, dict) or not isinstance(reply, str):
        return out
    found = state.get("variables")
    variables: dict[str, Any] = found if isinstance(found, dict) else {}
    messages = updater_messages(snapshot, variables, reply)
    if messages is None:
        return out
    problems = list(out.get("problems") or [])
    try:
        if isinstance(endpoint, Exception):
            raise endpoint
        async with ChatClient(endpoint) as client:
            answer = (await client.complete(messages)).text
        if not answer.strip():
            raise ValueError("the agent model answered nothing")
    except Exception as exc:  # the reply stays; the message says the update failed
        logger.info("MVU updater failed: %s", exc)
        problems.append(MvuWarning(kind="updater", path="", detail=str(exc)).model_dump())
        return {**out, "problems": problems}
    parsed = parse_filament(answer, FilamentTags())
    try:
        schema = await asyncio.to_thread(card_state_schema, snapshot.character.card)
    except ZodSchemaError as exc:
        problems.append(f"{exc}; the updates were applied without the schema")
        schema = None
    outcome = apply_mvu_ops(variables, parsed.ops, schema)
    problems.extend(f"MVU updater: {p}" for p in [*parsed.problems, *outcome.problems])
    problems.extend(w.model_dump(mode="json") for w in outcome.warnings)
    return {**out, "state": {**state, "variables": outcome.variables}, "problems": problems}
