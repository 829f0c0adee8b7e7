"""A SillyTavern quick reply set: ``QuickReplies/<name>.json`` of a user folder.

SillyTavern's Quick Reply extension (v2) saves each set as its ``toJSON()``: ``version``
2, ``name``, ``disableSend`` (clicking puts the text in the input instead of sending),
``placeBeforeInput``, ``injectInput``, ``color``, ``onlyBorderColor``, ``idIndex`` and
``qrList``, one object per button (``id``, ``label``, ``title``, ``message``,
``isHidden``, the ``executeOn*`` automation flags, ``contextList``...). Sets older than v2
(kept in ``settings.json`` as ``quickReplyPresets``) carry ``quickReplySlots`` with
``mes``/``label``/``title``/``hidden``; they are read into the v2 shape the way the
extension migrates them. Keys neither shape names are kept, so a set written back out is
the set that came in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from storyloom.core.errors import FieldProblem, FileFormatError
from storyloom.sillytavern.json_document import parse_json_document


class QuickReply(BaseModel):
    """One button of a set. ``message`` is what clicking it sends; one that starts with
    ``/`` is a STscript slash command."""

    model_config = ConfigDict(extra="allow")

    id: int = Field(default=0, description="The reply's number inside its set")
    label: str = Field(default="", description="The button's text")
    title: str = Field(default="", description="The button's tooltip")
    message: str = ""
    isHidden: bool = Field(default=False, description="Kept in the set, no button shown")
    executeOnStartup: bool = False
    executeOnUser: bool = False
    executeOnAi: bool = False

    @property
    def is_slash_command(self) -> bool:
        return self.message.lstrip().startswith("/")


class QuickReplySetFile(BaseModel):
    """A whole set file (v2 shape; a v1 set reads into it)."""

    model_config = ConfigDict(extra="allow")

    version: int = 2
    name: str = Field(min_length=1, description="The set's name (its file's stem)")
    disableSend: bool = Field(default=False, description="A click fills the input, never sends")
    placeBeforeInput: bool = Field(default=False, description="A click puts the text first")
    injectInput: bool = Field(default=False, description="A click adds the input's text too")
    color: str = Field(default="transparent", description="The buttons' colour (CSS)")
    onlyBorderColor: bool = False
    qrList: list[QuickReply] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_v1(cls, value: Any) -> Any:
        """A pre-v2 set (``quickReplySlots``) in the v2 shape, as the extension migrates it."""
        if not isinstance(value, dict) or value.get("version") == 2:
            return value
        slots = value.get("quickReplySlots")
        if not isinstance(slots, list):
            return value
        migrated = {k: v for k, v in value.items() if k != "quickReplySlots"}
        migrated["version"] = 2
        migrated["disableSend"] = value.get("quickActionEnabled", False)
        migrated["placeBeforeInput"] = value.get("placeBeforeInputEnabled", False)
        migrated["injectInput"] = value.get("AutoInputInject", False)
        migrated["qrList"] = [
            {
                "id": index + 1,
                "label": slot.get("label") or "",
                "title": slot.get("title") or "",
                "message": slot.get("mes") or "",
                "isHidden": slot.get("hidden", False),
                "executeOnStartup": slot.get("autoExecute_appStartup", False),
                "executeOnUser": slot.get("autoExecute_userMessage", False),
                "executeOnAi": slot.get("autoExecute_botMessage", False),
            }
            if isinstance(slot, dict)
            else slot
            for index, slot in enumerate(slots)
        ]
        return migrated


def parse_quick_reply_set(data: bytes | str, path: Path | str) -> QuickReplySetFile:
    """The set in ``data`` (read from ``path``); a file that does not fit is refused
    whole, naming ``path``, each field and why."""
    return parse_json_document(data, path, QuickReplySetFile, "a quick reply set")


def read_quick_reply_set(path: Path) -> QuickReplySetFile:
    """The set in the file at ``path`` (see :func:`parse_quick_reply_set`)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FileFormatError(path, [FieldProblem("", f"cannot be read ({exc.strerror})")]) from exc
    return parse_quick_reply_set(data, path)


def st_visible_quick_reply_sets(settings: Mapping[str, Any]) -> list[str] | None:
    """The sets SillyTavern shows under its message box, by name, from a user folder's
    ``settings.json``: ``extension_settings.quickReplyV2.config.setList`` entries with
    ``isVisible`` (none while the extension is off); a pre-v2 ``quickReply`` shows its
    selected preset, as the extension migrates it. None when the settings say nothing
    (every set shows)."""
    extensions = settings.get("extension_settings")
    if not isinstance(extensions, Mapping):
        return None
    v2 = extensions.get("quickReplyV2")
    if isinstance(v2, Mapping):
        if not v2.get("isEnabled", False):
            return []
        config = v2.get("config")
        links = config.get("setList") if isinstance(config, Mapping) else None
        if not isinstance(links, list):
            return []
        shown = [link for link in links if isinstance(link, Mapping)]
        return [
            link["set"]
            for link in shown
            if isinstance(link.get("set"), str) and link.get("isVisible", True)
        ]
    v1 = extensions.get("quickReply")
    if isinstance(v1, Mapping):
        if not v1.get("quickReplyEnabled", False):
            return []
        name = v1.get("selectedPreset") or v1.get("name") or "Default"
        return [name] if isinstance(name, str) else []
    return None
