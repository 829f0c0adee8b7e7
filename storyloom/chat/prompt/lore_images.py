"""Images of injected lore entries, sent to a vision model as OpenAI content parts.

The Weaver marks each message holding a lore entry that has an image with a small
reference (``images``: the KB and entry), never the image itself: the messages are
recorded with every reply, and a 10 MB image in each record would swell the chat's
database. The LLM Invoker reads the images just before it sends the request: to a
connection with ``vision`` on (and the chat API), the message's text becomes a text part
followed by one ``image_url`` part per image; to any other, the reference is dropped and
the entry's text (its ``content.value``, else its ``alt_text`` or ``caption``) is all the
model gets, as it already stands in the message.

Whether a model sees images is the connection's ``vision`` setting: an OpenAI-compatible
server says nothing reliable about it (``/v1/models`` lists names only), and a server
that gets image parts it cannot read refuses the whole request.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from storyloom.chat.prompt.weaver import WovenMessage
from storyloom.core.errors import NotFound
from storyloom.core.settings import ChatEndpoint
from storyloom.knowledge.caiu import CAIU
from storyloom.knowledge.entry_media import media_file, read_entry_image
from storyloom.project.knowledge_service import KnowledgeService

IMAGES_KEY = "images"
"""A woven message's list of ``{"kb_id", "entry_id"}``: the lore images it carries."""

_LORE_PREFIX = "lore:"


def _remote_url(entry: CAIU) -> str | None:
    url = entry.content.url or ""
    return url if url.startswith(("https://", "http://")) else None


def has_image(entry: CAIU) -> bool:
    """Whether ``entry`` shows an image: a file in its KB's folder or a web address."""
    content = entry.content
    if content.path and content.mime_type.startswith("image/"):
        return True
    return _remote_url(entry) is not None


def mark_lore_images(
    woven: Sequence[WovenMessage], knowledge: KnowledgeService | None
) -> list[dict[str, Any]]:
    """The messages of ``woven``, each one holding lore blocks of entries with an image
    marked with :data:`IMAGES_KEY` (in block order)."""
    if knowledge is None:
        return [item.message for item in woven]
    catalog = knowledge.snapshot().knowledge.catalog
    out: list[dict[str, Any]] = []
    for item in woven:
        refs: list[dict[str, str]] = []
        for block_id in item.block_ids:
            if not block_id.startswith(_LORE_PREFIX):
                continue
            kb_id, _, entry_id = block_id[len(_LORE_PREFIX) :].partition("/")
            loaded = catalog.get(kb_id)
            entry = loaded.kb.entry(entry_id) if loaded is not None else None
            if entry is not None and has_image(entry):
                refs.append({"kb_id": kb_id, "entry_id": entry_id})
        out.append({**item.message, IMAGES_KEY: refs} if refs else item.message)
    return out


def _image_url(knowledge: KnowledgeService, kb_id: str, entry_id: str) -> str | None:
    """The image as an ``image_url`` url (a data URL for a file); None when the entry or
    its image is gone since the prompt was woven, or its file is no image."""
    loaded = knowledge.snapshot().knowledge.catalog.get(kb_id)
    entry = loaded.kb.entry(entry_id) if loaded is not None else None
    if loaded is None or entry is None:
        return None
    if media_file(loaded.folder, entry) is not None:
        try:
            data, media_type = read_entry_image(loaded.kb, loaded.folder, entry_id)
        except NotFound:
            return None
        return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
    return _remote_url(entry)


def request_messages(
    messages: Sequence[dict[str, Any]],
    endpoint: ChatEndpoint,
    knowledge: KnowledgeService | None,
) -> list[dict[str, Any]]:
    """The messages as sent to ``endpoint``: image references become content parts for a
    vision connection on the chat API and are dropped for any other."""
    vision = endpoint.vision and endpoint.api == "chat" and knowledge is not None
    out: list[dict[str, Any]] = []
    for message in messages:
        refs = message.get(IMAGES_KEY)
        if refs is None:
            out.append(dict(message))
            continue
        sent = {k: v for k, v in message.items() if k != IMAGES_KEY}
        if vision and isinstance(refs, list):
            assert knowledge is not None
            urls = [
                url
                for ref in refs
                if isinstance(ref, dict)
                for url in [_image_url(knowledge, str(ref.get("kb_id")), str(ref.get("entry_id")))]
                if url is not None
            ]
            if urls:
                sent["content"] = [
                    {"type": "text", "text": str(message.get("content") or "")},
                    *({"type": "image_url", "image_url": {"url": url}} for url in urls),
                ]
        out.append(sent)
    return out
