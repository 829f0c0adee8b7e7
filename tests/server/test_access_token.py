"""``storyloom serve`` asks for its token on loopback too: another account on the same
machine reaches 127.0.0.1 as easily as its owner does. Tried as that other account would,
against the server started the way ``make run`` starts it."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import subprocess
import sys
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from .test_cli import REPO, storyloom

SERVING = re.compile(r"serving (http://\S+?)/(\S*) ")


@dataclass
class Served:
    url: str
    printed: str
    home: Path


def _serve(home: Path, *options: str) -> Generator[Served, None, None]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "STORYLOOM_HOME": str(home)}
    command = [sys.executable, "-m", "storyloom", "serve", "--port", "0", *options]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    ) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            address = SERVING.search(line)
            assert address is not None, line + (server.stderr.read() if server.stderr else "")
            yield Served(address.group(1), address.group(2), home)
        finally:
            server.terminate()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from _serve(tmp_path / "home")


def _token(served: Served) -> str:
    match = re.fullmatch(r"\?token=(\S+)", served.printed)
    assert match, f"the printed address carries no token: {served.printed!r}"
    return match.group(1)


RUN_CODE = {
    "tool": "CodeInterpreter:execute",
    "arguments": {"language": "python", "code": "open('/scratch/ran', 'w').write('x')"},
}

# What another account on the machine runs: it tries the token file, then the server.
OTHER_ACCOUNT = """
cat "$1/token" >/dev/null 2>&1 && echo "read the token"
curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \\
    --data-binary @- "$2/api/tools/call"
"""


def test_another_local_account_cannot_use_a_server_started_without_options(
    served: Served,
) -> None:
    import json

    # As nobody when the test can switch users (root); else as this user, without the token.
    user = 65534 if os.geteuid() == 0 else None
    attempt = subprocess.run(
        ["/bin/sh", "-c", OTHER_ACCOUNT, "sh", str(served.home), served.url],
        input=json.dumps(RUN_CODE).encode(),
        capture_output=True,
        timeout=120,
        user=user,
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
    )
    assert attempt.stdout.decode().split() == ["401"], attempt.stderr.decode()
    assert httpx.get(f"{served.url}/api/chats", timeout=30).status_code == 401
    with pytest.raises(InvalidStatus):
        asyncio.run(connect(served.url.replace("http://", "ws://") + "/ws").__aenter__())


def test_the_token_is_kept_private_in_the_data_directory_and_printed_once(
    served: Served,
) -> None:
    token = _token(served)
    kept = served.home / "token"
    assert kept.read_text().strip() == token
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(served.home.stat().st_mode) & 0o077 == 0
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{served.url}/api/chats", headers=headers, timeout=30).status_code == 200


def test_the_token_in_the_address_becomes_a_cookie_and_counts_nowhere_else(
    served: Served,
) -> None:
    token = _token(served)
    # In an API call's address it counts for nothing (it would stay in logs).
    assert httpx.get(f"{served.url}/api/chats?token={token}", timeout=30).status_code == 401
    with httpx.Client(base_url=served.url, timeout=30) as browser:
        first = browser.get(f"/?token={token}")
        assert first.status_code == 303 and first.headers["location"] == "/"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=" in cookie
        assert browser.get("/api/chats").status_code == 200
    # A wrong token in the address sets nothing.
    wrong = httpx.get(f"{served.url}/?token=not-{token}", timeout=30)
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers


def test_a_restart_keeps_the_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    opened = _serve(home)
    first = _token(next(opened))
    opened.close()
    again = _serve(home)
    try:
        assert _token(next(again)) == first
    finally:
        again.close()


def test_no_token_serves_loopback_only(tmp_path: Path) -> None:
    opened = _serve(tmp_path / "home", "--no-token")
    served = next(opened)
    try:
        assert served.printed == ""
        assert httpx.get(f"{served.url}/api/chats", timeout=30).status_code == 200
        assert not (served.home / "token").exists()
    finally:
        opened.close()
    refused = storyloom("serve", "--no-token", "--host", "0.0.0.0", "--port", "0", home=tmp_path)
    assert refused.returncode == 1
    assert "--no-token serves only loopback" in refused.stderr
