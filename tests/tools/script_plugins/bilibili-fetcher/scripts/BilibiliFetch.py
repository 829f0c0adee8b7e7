"""BilibiliFetch:getSubtitle, a storyloom script tool (docs/tools.md §6.2).

Reads one JSON line on stdin ({"arguments": {"url": ...}, "config": {...}, "tool": ...}),
finds the video's BV id, asks the Bilibili web API for the video's subtitles and prints
one JSON line: {"result": {...}} or {"error": "..."}.

Only the standard library: storyloom runs this with its sandboxed interpreter, which has
no site-packages. Config values: ``bilibiliCookie`` (sent as the Cookie header; some
subtitles need a logged-in user) and, optionally, ``apiBase`` (where the API is; the
default is Bilibili's own).
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

API_BASE = "https://api.bilibili.com"
BV_ID = re.compile(r"BV[0-9A-Za-z]{10}")
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0 Safari/537.36"
)
TIMEOUT_S = 10


class Failure(Exception):
    """What goes back to the caller as {"error": ...}."""


def get_json(url: str, cookie: str) -> Any:
    headers = {"User-Agent": USER_AGENT, "Referer": "https://www.bilibili.com/"}
    if cookie:
        headers["Cookie"] = cookie
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise Failure(f"Bilibili answered HTTP {exc.code} for {url}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Failure(f"network unavailable: {reason}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise Failure(f"Bilibili answered something that is not JSON from {url}") from None


def api(base: str, path: str, query: dict[str, Any], cookie: str) -> Any:
    """The ``data`` of one Bilibili web API call; its ``code`` must be 0."""
    answer = get_json(f"{base}{path}?{urllib.parse.urlencode(query)}", cookie)
    if not isinstance(answer, dict) or answer.get("code") != 0:
        code = answer.get("code") if isinstance(answer, dict) else None
        message = answer.get("message") if isinstance(answer, dict) else None
        raise Failure(f"Bilibili API {path} failed (code {code}): {message}")
    return answer.get("data") or {}


def get_subtitle(arguments: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    url = str(arguments.get("url") or "")
    found = BV_ID.search(url)
    if found is None:
        raise Failure(f"no BV id (BV followed by 10 letters or digits) in {url!r}")
    bvid = found.group(0)
    base = str(config.get("apiBase") or API_BASE).rstrip("/")
    cookie = str(config.get("bilibiliCookie") or "")

    view = api(base, "/x/web-interface/view", {"bvid": bvid}, cookie)
    cid = view.get("cid")
    if cid is None:
        raise Failure(f"Bilibili did not say which part of {bvid} to read (no cid)")
    player = api(base, "/x/player/v2", {"bvid": bvid, "cid": cid}, cookie)
    tracks = (player.get("subtitle") or {}).get("subtitles") or []
    if not tracks:
        hint = (
            ""
            if cookie
            else " (some subtitles are shown only to a logged-in user: set the Bilibili Cookie)"
        )
        raise Failure(f"video {bvid} has no subtitles{hint}")
    track = tracks[0]
    subtitle_url = str(track.get("subtitle_url") or "")
    if subtitle_url.startswith("//"):
        subtitle_url = "https:" + subtitle_url
    lines = get_json(subtitle_url, cookie).get("body") or []
    return {
        "bvid": bvid,
        "title": view.get("title", ""),
        "cid": cid,
        "language": track.get("lan", ""),
        "languageName": track.get("lan_doc", ""),
        "lines": [
            {"from": line.get("from"), "to": line.get("to"), "content": line.get("content", "")}
            for line in lines
        ],
        "text": "\n".join(str(line.get("content", "")) for line in lines),
    }


def main() -> None:
    try:
        request = json.loads(sys.stdin.readline())
        reply: dict[str, Any] = {
            "result": get_subtitle(request.get("arguments") or {}, request.get("config") or {})
        }
    except Failure as exc:
        reply = {"error": str(exc)}
    except ValueError as exc:
        reply = {"error": f"the request on stdin is not JSON: {exc}"}
    print(json.dumps(reply, ensure_ascii=False))


if __name__ == "__main__":
    main()
