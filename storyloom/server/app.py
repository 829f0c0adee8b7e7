"""The FastAPI application of one data directory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

from fastapi import FastAPI

from storyloom import __version__
from storyloom.server import (
    agent_api,
    background_api,
    character_api,
    chat_api,
    chat_frame_api,
    config_api,
    connections_api,
    group_api,
    health,
    knowledge_api,
    lore_api,
    mcp_api,
    mvu_api,
    persona_api,
    plugin_api,
    quick_reply_api,
    regex_api,
    scripts_api,
    settings_api,
    sprite_api,
    st_move_in_api,
    template_api,
    tools_api,
    workflow_api,
    writing_api,
    ws,
)
from storyloom.server.api_errors import install_error_handlers
from storyloom.server.json_text import LoneSurrogates
from storyloom.server.limits import BodyLimit, RequestLimits
from storyloom.server.origin_guard import OriginGuard
from storyloom.server.state import ServerState
from storyloom.server.token_auth import TokenAuth
from storyloom.server.web_app import STATIC_DIR, mount_web_app
from storyloom.server.ws_schema import openapi_with_ws_messages
from storyloom.tools.mcp_server import mcp_http_app
from storyloom.workflow.node_registry import NodeRegistry


def create_app(
    home: Path,
    *,
    token: str | None = None,
    loopback_only: bool = True,
    environ: Mapping[str, str] | None = None,
    static_dir: Path = STATIC_DIR,
    project_dir: Path | None = None,
    node_registry: NodeRegistry | None = None,
    limits: RequestLimits | None = None,
    local_models: bool = True,
) -> FastAPI:
    """Build the app; ``token`` set means every request must carry it.

    ``loopback_only`` (the server is bound to a loopback address) makes the app refuse
    any ``Host`` that does not name this computer (see :mod:`origin_guard`).
    ``project_dir`` is the project the web app works on (default
    ``<home>/projects/default``, created when missing). ``node_registry`` gives the
    workflow node types (default: the built-ins and installed plugins). ``limits`` are the
    request body limits (default: :class:`RequestLimits`' defaults). ``local_models``
    starts the local models the settings want (the user's .gguf files and, with no user
    model set up, the embedded demo model) with the server and stops them with it.
    """
    limits = limits or RequestLimits()
    state = ServerState.open(
        home,
        token=token,
        environ=environ,
        project_dir=project_dir,
        node_registry=node_registry,
        local_models=local_models,
    )

    # Streamable HTTP MCP at /mcp, behind the same guards (and token) as everything else;
    # its own DNS-rebinding check holds only where the server answers loopback alone.
    mcp = mcp_http_app(state.tools, bind_host="127.0.0.1" if loopback_only else "0.0.0.0")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.start_local_models()
        async with mcp.lifespan():
            await state.tools.start()
            # Curation a stopped server left unfinished goes on.
            state.writing.start()
            try:
                yield
            finally:
                await state.writing.aclose()
                await state.tools.aclose()
        await state.chat.aclose()
        state.local_models.close()
        await state.workflow_runs.aclose()
        await state.knowledge.aclose()
        state.database.close()

    # No /docs or /redoc: FastAPI's pages load their scripts from a CDN into this origin,
    # and storyloom is offline-first. /openapi.json stays (`storyloom openapi` prints it).
    app = FastAPI(
        title="storyloom", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.storyloom = state
    app.state.limits = limits
    # FastAPI's documented way to extend the document: replace the app's openapi().
    app.openapi = partial(openapi_with_ws_messages, app)  # type: ignore[method-assign]
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(settings_api.router)
    app.include_router(connections_api.router)
    app.include_router(template_api.router)
    app.include_router(knowledge_api.router)
    app.include_router(workflow_api.router)
    app.include_router(chat_api.router)
    app.include_router(chat_frame_api.router)
    app.include_router(chat_api.presets_router)
    app.include_router(mvu_api.router)
    app.include_router(group_api.router)
    app.include_router(character_api.router)
    app.include_router(persona_api.router)
    app.include_router(st_move_in_api.router)
    app.include_router(lore_api.router)
    app.include_router(tools_api.router)
    app.include_router(plugin_api.router)
    app.include_router(config_api.router)
    app.include_router(agent_api.router)
    app.include_router(mcp_api.router)
    app.include_router(scripts_api.router)
    app.include_router(regex_api.router)
    app.include_router(quick_reply_api.router)
    app.include_router(background_api.router)
    app.include_router(sprite_api.router)
    app.include_router(writing_api.router)
    app.include_router(ws.router)
    app.router.routes.append(mcp.route("/mcp"))
    # Before the web app, whose catch-all route would answer /plugins/... with its page.
    app.include_router(plugin_api.static_router)
    mount_web_app(app, static_dir)
    # Innermost of the three: only a request the guards let through has its body read.
    app.add_middleware(LoneSurrogates)
    app.add_middleware(BodyLimit, limits=limits)
    if token:
        app.add_middleware(TokenAuth, token=token)
    # Added last so it runs first: a foreign page is refused before anything else.
    app.add_middleware(OriginGuard, loopback_only=loopback_only)
    return app
