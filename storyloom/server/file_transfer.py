"""Files crossing the HTTP boundary: uploads read with a size limit, downloads named.

A browser may send a path as the upload's file name, and a name that is not ASCII must
still reach the user's save dialog intact; both are handled here once, for every route
that takes or gives a file.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import Response, UploadFile

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
"""More than any SillyTavern card, book, chat or knowledge package."""
_CHUNK = 1024 * 1024


def upload_name(file: UploadFile) -> str:
    """The upload's file name for messages: only its last part (it never names a place to
    write)."""
    name = (file.filename or "upload").replace("\\", "/").rsplit("/", 1)[-1].strip()
    return name or "upload"


async def read_upload(file: UploadFile, limit: int = MAX_UPLOAD_BYTES) -> bytes | None:
    """The upload's bytes, or None as soon as it is larger than ``limit``."""
    data = bytearray()
    while chunk := await file.read(_CHUNK):
        data += chunk
        if len(data) > limit:
            return None
    return bytes(data)


def too_large(filename: str, limit: int = MAX_UPLOAD_BYTES) -> str:
    return f"{filename} is larger than {limit // (1024 * 1024)} MB"


def download(data: bytes, filename: str, media_type: str) -> Response:
    """``data`` as an attachment called ``filename`` (any script; an ASCII fallback too)."""
    ascii_name = filename.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
    disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename)}"
    return Response(data, media_type=media_type, headers={"content-disposition": disposition})
