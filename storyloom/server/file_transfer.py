"""Files crossing the HTTP boundary: uploads read with a size limit, downloads named.

A browser may send a path as the upload's file name, a name longer than a file system
allows or one with control characters; and a name that is not ASCII must still reach the
user's save dialog intact. Both directions are handled here once, for every route that
takes or gives a file. The limits are those of :mod:`.limits`. Avatars (images checked by
content) and cards imported into the project from an upload are read here too.
"""

from __future__ import annotations

import asyncio
import functools
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Form, Request, Response, UploadFile

from storyloom.chat.personalab.card_reimport import OnConflict
from storyloom.core.errors import FieldProblem, FileFormatError, InvalidInput, NotFound
from storyloom.core.image_kind import image_type
from storyloom.project.knowledge_import import CardHome
from storyloom.project.knowledge_service import ImportOutcome, KnowledgeService
from storyloom.server.api_errors import UploadTooLarge, upload_errors
from storyloom.server.generated_avatar import initials_response
from storyloom.server.limits import MAX_FILENAME_BYTES, MAX_UPLOAD_BYTES, RequestLimits, size_text
from storyloom.sillytavern.untrusted_json import (
    JsonSyntaxError,
    UntrustedJsonError,
    loads_untrusted,
)

_CHUNK = 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DOWNLOAD_NAME_BYTES = 120
"""A download's name is cut to this; the title it comes from may be much longer."""

# The form field of every route that may import a card (Characters, Knowledge, chats,
# groups): one wording, one default.
CardConflictChoice = Annotated[
    OnConflict,
    Form(
        description="A card that is a character here already: ask (409, nothing written), "
        "update (a new version of it) or keep_both (a second character)"
    ),
]


def upload_limit(request: Request) -> int:
    """The largest file this server takes (``storyloom serve --max-upload-mb``)."""
    limits = getattr(request.app.state, "limits", None)
    return limits.upload_bytes if isinstance(limits, RequestLimits) else MAX_UPLOAD_BYTES


def _cut(name: str, limit: int) -> str:
    """``name`` at most ``limit`` UTF-8 bytes, its extension kept when it is short."""
    if len(name.encode("utf-8")) <= limit:
        return name
    suffix = PurePosixPath(name).suffix
    suffix = suffix if len(suffix.encode("utf-8")) <= 16 else ""
    stem = name[: len(name) - len(suffix)] if suffix else name
    room = limit - len(suffix.encode("utf-8"))
    return stem.encode("utf-8")[:room].decode("utf-8", "ignore") + suffix


def upload_name(file: UploadFile) -> str:
    """The upload's file name for messages: only its last part (it never names a place to
    write), without control characters, and at most 255 UTF-8 bytes (a longer one is cut,
    keeping its extension), so it can name a temporary copy of the upload."""
    name = (file.filename or "upload").replace("\\", "/").rsplit("/", 1)[-1]
    name = _CONTROL.sub("", name).strip()
    name = _cut(name, MAX_FILENAME_BYTES).strip()
    return name if name not in ("", ".", "..") else "upload"


async def read_upload(file: UploadFile, limit: int = MAX_UPLOAD_BYTES) -> bytes | None:
    """The upload's bytes, or None as soon as it is larger than ``limit``."""
    data = bytearray()
    while chunk := await file.read(_CHUNK):
        data += chunk
        if len(data) > limit:
            return None
    return bytes(data)


def too_large(filename: str, limit: int = MAX_UPLOAD_BYTES) -> str:
    return f"{filename} is larger than {size_text(limit)}, the most this server takes"


async def read_named_upload(
    request: Request, file: UploadFile, limit: int | None = None
) -> tuple[str, bytes]:
    """The upload's name (:func:`upload_name`) and bytes; :class:`UploadTooLarge` when it
    is larger than ``limit`` (default: this server's :func:`upload_limit`)."""
    filename = upload_name(file)
    limit = upload_limit(request) if limit is None else limit
    data = await read_upload(file, limit)
    if data is None:
        raise UploadTooLarge(too_large(filename, limit))
    return filename, data


def upload_json(filename: str, data: bytes) -> Any:
    """An uploaded file's JSON, read as untrusted; a :class:`FileFormatError` naming the
    file, where and why when it does not read."""
    try:
        return loads_untrusted(data)
    except JsonSyntaxError as exc:
        raise FileFormatError(filename, [FieldProblem("", exc.reason)]) from None
    except UntrustedJsonError as exc:
        raise FileFormatError(filename, [FieldProblem(exc.where, exc.reason)]) from None


async def read_image_upload(request: Request, file: UploadFile) -> tuple[bytes, str]:
    """An uploaded image's bytes and media type; anything but a PNG, JPEG, GIF or WebP
    image (by content, whatever its name says) is refused."""
    filename, data = await read_named_upload(request, file)
    media_type = image_type(data)
    if media_type is None:
        raise InvalidInput(f"{filename}: not a PNG, JPEG, GIF or WebP image", [])
    return data, media_type


def avatar_response(path: Path | None, owner: str, name: str) -> Response:
    """The avatar file at ``path`` as the image it is; None (``owner`` has none): a face
    generated from ``name``. Only an image goes out, with its own type: the owner's file
    names any file of its folder. The browser asks again each time, as an upload keeps
    the file's name."""
    if path is None:
        return initials_response(name)
    data = path.read_bytes()
    media_type = image_type(data)
    if media_type is None:
        raise NotFound(f"the avatar of {owner} ({path.name}) is not an image")
    return Response(data, media_type=media_type, headers={"cache-control": "no-cache"})


async def import_upload(
    knowledge: KnowledgeService, data: bytes, filename: str, *, card_home: CardHome | None = None
) -> ImportOutcome:
    """``data``, uploaded as ``filename``, imported into the project as the Knowledge page
    imports a file (a card becomes a character preset, or a new version of one here as
    ``card_home`` decides; its book a KB); the new KBs are embedded in the background. A
    problem names ``filename``."""
    with tempfile.TemporaryDirectory(prefix="storyloom-upload-") as tmp:
        path = Path(tmp) / "upload"
        path.write_bytes(data)
        with upload_errors(filename, saved_as=path.with_name(filename)):
            outcome = await asyncio.to_thread(
                functools.partial(
                    knowledge.import_file, path, filename, "local", card_home=card_home
                )
            )
    knowledge.embed_later(outcome.created)
    return outcome


def download(data: bytes, filename: str, media_type: str) -> Response:
    """``data`` as an attachment called ``filename`` (RFC 6266: the name in any script as
    ``filename*``, an ASCII fallback as ``filename``); a long name is cut."""
    name = _cut(_CONTROL.sub("", filename).strip() or "download", _DOWNLOAD_NAME_BYTES)
    ascii_name = "".join(c if c.isascii() and c not in '"\\;%' else "_" for c in name)
    disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"
    return Response(data, media_type=media_type, headers={"content-disposition": disposition})
