"""``storyloom serve``: the web server on a socket bound before uvicorn starts."""

from __future__ import annotations

import errno
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from storyloom import __version__
from storyloom.cli.options import HomeOption, fail
from storyloom.core.errors import StoryloomError
from storyloom.core.home import ensure_home, resolve_home
from storyloom.core.settings import SettingsStore


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before starting uvicorn so a busy port is one clear line, not a traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP by name: asyncio turns TCP_NODELAY on only for such sockets, and without
    # it every request after the first on a kept-alive connection waits ~40 ms (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise fail(
                f"port {port} on {host} is already in use; stop what uses it or pass --port"
            ) from None
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default 127.0.0.1, from settings).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8420, from settings).")] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Access token (default: the one kept in <data dir>/token, made on first use)."
        ),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token",
            help="Serve without a token: only for loopback on a machine no one else uses.",
        ),
    ] = False,
    project: Annotated[
        Path | None,
        typer.Option(
            help="Project folder the web app works on (default: <data dir>/projects/default).",
            show_default=False,
        ),
    ] = None,
    max_body_mb: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Largest request body and WebSocket message in MB (default 16).",
            show_default=False,
        ),
    ] = None,
    max_upload_mb: Annotated[
        int | None,
        typer.Option(min=1, help="Largest uploaded file in MB (default 50).", show_default=False),
    ] = None,
    no_local_model: Annotated[
        bool,
        typer.Option(
            "--no-local-model",
            help="Start no local model: not the embedded demo model when no user model is "
            "set up, nor the .gguf files the settings name.",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Start the web server and print its address. With no user model set up, the
    embedded demo model (SmolLM2-135M, offline) answers, so a first chat works at once."""
    import uvicorn

    from storyloom.server.app import create_app
    from storyloom.server.limits import RequestLimits
    from storyloom.server.token_auth import is_loopback, stored_token, weak_token_reason

    if token is not None and no_token:
        raise fail("--token and --no-token contradict each other; give one")
    if token is not None and (weak := weak_token_reason(token)):
        raise fail(weak)
    limits = RequestLimits.in_mib(body=max_body_mb, upload=max_upload_mb)

    try:
        data_dir = ensure_home(resolve_home(home))
        loaded = SettingsStore(data_dir).load()
    except StoryloomError as exc:
        raise fail(exc) from None
    if loaded.error:
        typer.echo(
            f"storyloom: {loaded.error}\n  defaults are in use; the file was not changed",
            err=True,
        )
    bind_host = host or loaded.effective.server.host
    bind_port = loaded.effective.server.port if port is None else port
    if no_token and not is_loopback(bind_host):
        raise fail(
            f"--no-token serves only loopback: on {bind_host} other machines could use this "
            "server (and its sandbox); leave --no-token out"
        )
    if not no_token and token is None:
        try:
            token = stored_token(data_dir)
        except StoryloomError as exc:
            raise fail(exc) from None
    sock = bind_socket(bind_host, bind_port)
    actual_port = sock.getsockname()[1]
    shown_host = f"[{bind_host}]" if ":" in bind_host else bind_host
    address = f"http://{shown_host}:{actual_port}/"
    if token:
        address += f"?token={token}"
    try:
        application = create_app(
            data_dir,
            token=token,
            loopback_only=is_loopback(bind_host),
            project_dir=project,
            limits=limits,
            local_models=not no_local_model,
        )
    except (StoryloomError, OSError) as exc:
        sock.close()
        raise fail(exc) from None
    typer.echo(f"storyloom {__version__} serving {address}  (data: {data_dir})", err=False)
    sys.stdout.flush()
    config = uvicorn.Config(
        application, log_level="warning", ws="websockets-sansio", ws_max_size=limits.body_bytes
    )
    uvicorn.Server(config).run(sockets=[sock])
