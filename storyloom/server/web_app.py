"""Serving the built browser app (``web/`` builds into ``storyloom/server/static``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"

_NOT_BUILT = """<!doctype html><html><head><meta charset="utf-8"><title>storyloom</title></head>
<body><h1>storyloom</h1><p>The web app is not built. Run <code>make run</code> (or
<code>cd web &amp;&amp; npm ci &amp;&amp; npm run build</code>) and reload.</p></body></html>"""


def _may_name_a_file(path: str) -> bool:
    """False for a path no file system takes (a NUL, a part over 255 bytes, over 2 KB in
    all): asking the file system about it would fail instead of saying no."""
    sizes = [len(part.encode("utf-8", "surrogatepass")) for part in path.split("/")]
    return "\0" not in path and max(sizes) <= 255 and sum(sizes) <= 2048


def mount_web_app(app: FastAPI, static_dir: Path = STATIC_DIR) -> None:
    assets = static_dir / "assets"
    if assets.is_dir():
        app.mount("/assets", StaticFiles(directory=assets), name="assets")

    @app.get("/{path:path}", include_in_schema=False)
    def spa(path: str, request: Request) -> Response:
        # The router of the single-page app owns every other path, but /api stays JSON.
        if path.startswith("api/") or path == "api":
            raise HTTPException(404, f"no such API path: /{path}")
        if not _may_name_a_file(path):
            raise HTTPException(404, "no such page: the path cannot name one")
        index = static_dir / "index.html"
        if not index.is_file():
            return HTMLResponse(_NOT_BUILT)
        candidate = (static_dir / path).resolve()
        if path and candidate.is_file() and candidate.is_relative_to(static_dir.resolve()):
            return FileResponse(candidate)
        return FileResponse(index, headers={"cache-control": "no-cache"})
