"""What kind of image a file is, by its first bytes (never by its name).

An image the user or a stranger's folder gives is served back to the browser with the
type found here; anything that is not a PNG, JPEG, GIF or WebP image is never served as
one, whatever its name says.
"""

from __future__ import annotations

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

IMAGE_SUFFIXES: dict[str, str] = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}
"""The suffix a stored image of each type gets."""


def image_type(data: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP image by its first bytes; None for
    anything else (never served as an image)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _IMAGE_MAGIC if data.startswith(magic)), None)
