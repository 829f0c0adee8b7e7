"""Why a curation step ran without the agent model, as a term and values.

The studio shows each step of a kept chapter's curation; a step skipped for want of a
model says what is missing and what it did instead. The English sentence stays (the CLI
and logs read it); beside it goes a :class:`StepReason`, which a page says in its own
language (``writing.curation.reason.<term>``). The curation table keeps the reason in
its error column as JSON; a row written before it was structured holds the sentence.
"""

from __future__ import annotations

import json
from typing import Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

StepReasonTerm = Literal[
    "summary_no_model",
    "summary_agent_down",
    "facts_no_model",
    "facts_agent_down",
]
"""What a step did without a model: the summary is the chapter's opening and closing
lines; the facts are the offline prose reader's. ``no_model``: neither an agent model
nor the chat model is set up; ``agent_down``: the local agent model does not run (its
``problem`` says why)."""

OFFLINE_READER_NOTE = (
    "read by the offline prose reader: characters and places whose names recur, and facts "
    "stated in a plain sentence (eyes, hair, height, scars, kin, home, occupation and rank, "
    "deaths, injuries, lost limbs, possessions, hidden things, debts, oaths), changes "
    "included; not facts only implied or spread over several sentences, other kinds of "
    "fact, relations other than kin, or plot threads"
)


class StepReason(BaseModel):
    """Why a step ran without the agent model (a term and its values)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, frozen=True
    )

    term: StepReasonTerm
    problem: str | None = Field(
        default=None, description="With *_agent_down: why the local agent model does not run"
    )


def english(reason: StepReason) -> str:
    """The reason in English, as the CLI, the logs and the ``reasons`` field say it."""
    no_model = (
        "no model is set up (neither an agent model nor your chat model). Set one under Settings"
    )
    down = f"the agent model does not run ({reason.problem}). Fix it under Settings → Agent LLM"
    match reason.term:
        case "summary_no_model":
            return f"{no_model}: without one the summary is the chapter's opening and closing lines"
        case "summary_agent_down":
            return f"{down}: without one the summary is the chapter's opening and closing lines"
        case "facts_no_model":
            return f"{no_model}. Facts were {OFFLINE_READER_NOTE}"
        case "facts_agent_down":
            return f"{down}. Facts were {OFFLINE_READER_NOTE}"
        case _:
            assert_never(reason.term)


def stored(reason: StepReason) -> str:
    """The reason as the curation table's error column keeps it."""
    return json.dumps({"reason": reason.model_dump(mode="json"), "detail": english(reason)})


def read_stored(text: str) -> tuple[str, StepReason | None]:
    """(the English sentence, the structured reason) of an error column's text; a row
    written before reasons were structured gives its sentence and None."""
    if not text.startswith("{"):
        return text, None
    try:
        raw = json.loads(text)
        reason = StepReason.model_validate(raw["reason"])
    except (ValueError, KeyError, TypeError, ValidationError):
        return text, None
    return english(reason), reason
