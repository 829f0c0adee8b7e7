"""What ``/api/sillytavern`` answers: moving a SillyTavern user folder in.

These models are the one description of the preview, the progress of an import and its
report; the CLI prints the same report and the web app's types are generated from them.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

StKind = Literal[
    "characters",
    "worlds",
    "personas",
    "chats",
    "groups",
    "group_chats",
    "presets",
    "instruct",
    "context",
    "regex",
    "variables",
    "quick_replies",
    "backgrounds",
    "sprites",
    "themes",
]
"""What a SillyTavern user folder holds, one kind per thing storyloom imports."""

ST_KINDS: tuple[StKind, ...] = get_args(StKind)
"""The kinds in the order an import takes them (books before the cards bound to them,
characters and personas before the chats that speak with them)."""


class StFolderRequest(BaseModel):
    path: str = Field(
        min_length=1,
        description="A SillyTavern user folder (data/<user>), or SillyTavern's root "
        "(with data/<user>/ or an old public/ layout), on the server's machine",
    )
    user: str | None = Field(
        default=None, description="Which data/<user> of a root to take (default: default-user)"
    )


class StProblem(BaseModel):
    """Something in the folder that could not be read; it is skipped, the rest comes."""

    file: str = Field(description="The file, relative to the user folder")
    field: str = Field(default="", description="Where in the file ('' for the whole file)")
    reason: str


class StInactive(BaseModel):
    """Something kept but not put to work, and why (Tavern Helper scripts, extensions'
    settings storyloom has no use for)."""

    what: str
    why: str


class StKindPreview(BaseModel):
    kind: StKind
    found: int = Field(ge=0, description="Items of this kind in the folder")
    new: int = Field(ge=0, description="Items an import would add")
    changed: int = Field(ge=0, description="Items here already that changed since (new versions)")


class StFolderPreview(BaseModel):
    """What an import of the folder would bring, before anything is written."""

    path: str = Field(description="The user folder that will be read")
    layout: Literal["user", "root", "public"] = Field(
        description="user: a data/<user> folder; root: SillyTavern's root; public: the "
        "old layout with public/characters, public/chats..."
    )
    kinds: list[StKindPreview]
    problems: list[StProblem] = Field(default_factory=list)


class StKindCount(BaseModel):
    kind: StKind
    added: int = Field(default=0, ge=0)
    updated: int = Field(default=0, ge=0, description="Changed since the last import")
    unchanged: int = Field(default=0, ge=0, description="Here already, as they are there")


class StImportReport(BaseModel):
    """What an import did: counts per kind, what is kept inactive, what was skipped."""

    path: str
    counts: list[StKindCount]
    inactive: list[StInactive] = Field(default_factory=list)
    problems: list[StProblem] = Field(default_factory=list)


class StImportJob(BaseModel):
    job_id: str


class StKindProgress(BaseModel):
    kind: StKind
    done: int = Field(ge=0)
    total: int = Field(ge=0)


class StImportProgress(BaseModel):
    """An import under way (``running``) or finished (``done`` with its report,
    ``failed`` with the error: each thing it brought before is whole, and running it
    again goes on where it stopped)."""

    job_id: str
    state: Literal["running", "done", "failed"]
    kinds: list[StKindProgress]
    report: StImportReport | None = None
    error: str | None = None
