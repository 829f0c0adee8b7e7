"""An ASGI app served for a test or a benchmark: uvicorn in a daemon thread on a free
loopback port, its lifespan run, stopped when the ``with`` block ends."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp


@contextlib.contextmanager
def serve_in_thread(app: ASGIApp, *, start_timeout: float = 20) -> Iterator[str]:
    """``app`` on a free loopback port; yields its base URL (``http://127.0.0.1:<port>``).
    The port is bound before uvicorn starts, so no other process can take it meanwhile."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on port {port} did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
