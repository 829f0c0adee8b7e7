"""``/api/regex-scripts``: the user's global regex scripts (SillyTavern's global scope).

They run in every chat, before the character's own scripts, on what the chat stores,
shows and sends to the model (:meth:`ChatService.regex_scripts`). The list is saved
whole: ``PUT`` replaces it, and a script that does not fit (a field of the wrong type, a
pattern that does not compile) is a 422 naming ``[index].field``, with nothing written.
``POST /import`` takes a file exported from SillyTavern's regex panel (one script or a
list) and adds its scripts at the end, each with a new id, as SillyTavern's import does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, File, Request, UploadFile
from pydantic import BaseModel, Field

from storyloom.chat.prompt.regex_scripts import pattern_problems
from storyloom.chat.store.regex_library import GlobalRegexScripts, read_scripts
from storyloom.chat.store.regex_script import RegexScript
from storyloom.core.errors import FileFormatError, InvalidInput, StoryloomError
from storyloom.server.api_errors import error_responses, upload_errors
from storyloom.server.file_transfer import read_named_upload, upload_json
from storyloom.server.state import server_state

router = APIRouter(prefix="/api/regex-scripts", tags=["regex scripts"])

_ERRORS = error_responses(413, 422)


class RegexScriptList(BaseModel):
    scripts: list[RegexScript] = Field(description="In the order they run")
    problem: str | None = Field(
        default=None,
        description="Why the saved list cannot be read (file, field, reason): no global "
        "script runs until it is fixed or replaced",
    )


class RegexImportReport(RegexScriptList):
    imported: int = Field(description="How many scripts the file added")


def _store(request: Request) -> GlobalRegexScripts:
    return GlobalRegexScripts.in_home(server_state(request).home)


def _check_patterns(what: str, scripts: Sequence[RegexScript]) -> None:
    problems = pattern_problems(scripts)
    if problems:
        raise InvalidInput.of(what, problems)


@router.get("", response_model=RegexScriptList)
def list_regex_scripts(request: Request) -> RegexScriptList:
    """Every global script, disabled ones too. A saved list that does not read answers
    none, with the problem (the file is left for the user to fix or replace)."""
    try:
        return RegexScriptList(scripts=_store(request).load())
    except StoryloomError as exc:
        return RegexScriptList(scripts=[], problem=str(exc))


@router.put("", response_model=RegexScriptList, responses=_ERRORS)
def save_regex_scripts(request: Request, scripts: list[RegexScript]) -> RegexScriptList:
    """Replace the list (in the order they run); a bad script is a 422 naming its index
    and field, and nothing is written."""
    _check_patterns("regex scripts", scripts)
    store = _store(request)
    store.save(scripts)
    return RegexScriptList(scripts=store.load())


@router.post("/import", status_code=201, response_model=RegexImportReport, responses=_ERRORS)
async def import_regex_scripts(
    request: Request,
    file: Annotated[UploadFile, File(description="A SillyTavern regex export (JSON)")],
) -> RegexImportReport:
    """A regex file exported from SillyTavern (one script object, or a list of them),
    added after the scripts there. A file that does not read, or a saved list that does
    not, is refused with file, field and reason, and nothing is written."""
    filename, data = await read_named_upload(request, file)
    with upload_errors(filename):
        document = upload_json(filename, data)
        try:
            found = read_scripts(document)
            _check_patterns("regex scripts", found)
        except InvalidInput as exc:
            raise FileFormatError(filename, exc.problems) from None
    if not found:
        raise InvalidInput(f"{filename}: no regex script in the file")
    fresh = [s.model_copy(update={"id": str(uuid.uuid4())}) for s in found]
    scripts = await asyncio.to_thread(_store(request).append, fresh)
    return RegexImportReport(scripts=scripts, imported=len(fresh))
