"""Why an EJS template was left as written: what a turn's snapshot, the prompt
inspector's lore record and the reply's warnings keep (the templates run in
:mod:`storyloom.chat.prompt.ejs_template`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TemplateProblem(BaseModel):
    """Why a template was left as written: structured, so the page can say it in the
    reader's language."""

    name: str = Field(description="The template: the entry, field or message it is")
    line: int | None = Field(default=None, description="Its line (1 first), when known")
    message: str = Field(description="The JavaScript error or the limit, as the engine said it")
    limit: str | None = Field(default=None, description="time, memory or stack: what stopped it")
