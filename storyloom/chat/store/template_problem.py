"""Why an EJS template was left as written: what a turn's snapshot, the prompt
inspector's lore record and the reply's warnings keep (the templates run in
:mod:`storyloom.chat.prompt.ejs_template`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

TemplateOrigin = Literal["lore", "lore_condition", "card", "message", "preset"]
"""Where a template is: a lore entry's text, its ``@@if``, a card field, a message, a
prompt of the chat-completion preset (the pipeline's Skein Builder)."""


class TemplateProblem(BaseModel):
    """Why a template was left as written: structured, so the page can say it in the
    reader's language (``origin`` and ``label``; ``name`` is the two in English words,
    for logs and the reply's warnings)."""

    name: str = Field(description="The template: the entry, field or message it is")
    origin: TemplateOrigin = Field(default="lore", description="What kind of text it is in")
    label: str = Field(
        default="", description="The entry's title, the card field's key or the message id"
    )
    line: int | None = Field(default=None, description="Its line (1 first), when known")
    message: str = Field(description="The JavaScript error or the limit, as the engine said it")
    limit: str | None = Field(default=None, description="time, memory or stack: what stopped it")
