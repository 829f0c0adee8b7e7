"""Fixtures shared by the sandbox tests (and by any test that runs code sandboxed)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from storyloom.sandbox import SandboxStatus, require_sandbox, sandbox_status
from tests.sandbox.sandbox_support import HOST_BODY, HostHttp


@pytest.fixture
def sandbox_ready() -> SandboxStatus:
    """The sandbox works on this machine.

    Where it does not (no user namespaces, root without a pids cgroup) the test FAILS
    with the reason and the fix: sandboxing is a requirement, so it is never skipped.
    """
    require_sandbox()
    return sandbox_status()


@pytest.fixture
def host_http() -> Iterator[HostHttp]:
    """What a sandboxed program must not reach: a server on the host's own loopback."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(HOST_BODY)))
            self.end_headers()
            self.wfile.write(HOST_BODY)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HostHttp(int(server.server_address[1]), seen)
    finally:
        server.shutdown()
        server.server_close()
