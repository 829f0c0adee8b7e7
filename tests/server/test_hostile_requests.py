"""Odd, hostile and oversized requests against a real server: each gets a 4xx with the
error envelope (or is handled, like a lone surrogate), and the server answers afterwards.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storyloom.server.limits import MAX_TITLE_CHARS, RequestLimits

from .conftest import LiveServer
from .test_cli import storyloom

TOKEN = "a-strong-test-token-0123456789"
PRESETS = Path("projects/default/presets")


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    # A fresh connection per request: a refused body may leave its connection closed.
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=live_server.url, timeout=30, limits=limits) as c:
        yield c


def refused(response: httpx.Response, status: int | None = None) -> str:
    """The envelope's message of a 4xx answer (``status`` exactly when given)."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    if status is not None:
        assert response.status_code == status, response.text[:300]
    body = response.json()
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return str(body["error"]["message"])


def still_answers(server: LiveServer) -> None:
    assert httpx.get(f"{server.url}/api/health", timeout=30).status_code == 200


def raw_request(
    server: LiveServer, head: str, body: bytes = b"", *, until_answered: bool = False
) -> httpx.Response:
    """One HTTP/1.1 request written as bytes (what httpx would not send or would clean).
    Read until the server closes, or with ``until_answered`` until the answer's declared
    length is in (a server draining a body the client never sends closes only later)."""
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if until_answered and _answered(answer):
                break
    head_bytes, _, content = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head_bytes.decode("latin-1").split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in header_lines)}
    if headers.get("transfer-encoding") == "chunked":
        content, rest = b"", content
        while (size := int(rest.split(b"\r\n", 1)[0], 16)) > 0:
            chunk_start = rest.index(b"\r\n") + 2
            content += rest[chunk_start : chunk_start + size]
            rest = rest[chunk_start + size + 2 :]
        del headers["transfer-encoding"]
    return httpx.Response(int(status_line.split()[1]), headers=headers, content=content)


def _answered(answer: bytes) -> bool:
    head, found, content = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return len(content) >= int(value)
    return False


def multipart(filename: bytes, content: bytes) -> tuple[str, bytes]:
    boundary = "hostileboundary"
    body = (
        f"--{boundary}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: application/octet-stream\r\n\r\n'
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return f"multipart/form-data; boundary={boundary}", body


WORLD_INFO = json.dumps({"entries": {"0": {"uid": 0, "key": ["k"], "content": "c"}}}).encode()
ST_CHAT = b'{"user_name":"U","character_name":"C"}\n{"name":"U","is_user":true,"mes":"hi"}\n'


# -- 6: odd but valid input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/%00", "/a%00b/c", "/" + "a" * 300, "/x/" + ("b" * 200 + "/") * 25]
)
def test_a_page_path_no_file_can_have_is_a_404(
    http: httpx.Client, live_server: LiveServer, path: str
) -> None:
    refused(http.get(path), 404)
    still_answers(live_server)


def test_a_page_path_with_a_broken_character_serves_the_app(http: httpx.Client) -> None:
    response = http.get("/%ff")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")


LONG_NAME = "é" * 200 + ".json"  # 405 bytes of UTF-8


@pytest.mark.parametrize(
    ("route", "content"),
    [
        ("/api/knowledge/import", WORLD_INFO),
        ("/api/chats/import", ST_CHAT),
        ("/api/workflows/import-st-preset", b'{"prompts": []}'),
    ],
)
def test_an_upload_name_too_long_for_a_file_system_is_cut(
    http: httpx.Client, live_server: LiveServer, route: str, content: bytes
) -> None:
    response = http.post(route, files={"file": (LONG_NAME, content)})
    assert response.status_code == 201, response.text[:300]
    if route == "/api/knowledge/import":
        name = response.json()["filename"]
        assert len(name.encode()) <= 255 and name.endswith(".json")
    still_answers(live_server)


@pytest.mark.parametrize(
    ("route", "content"),
    [("/api/knowledge/import", WORLD_INFO), ("/api/chats/import", ST_CHAT)],
)
def test_an_upload_name_with_a_nul_byte_is_imported_without_it(
    live_server: LiveServer, route: str, content: bytes
) -> None:
    content_type, body = multipart(b"bad\x00name.json", content)
    head = (
        f"POST {route} HTTP/1.1\nHost: 127.0.0.1\nContent-Type: {content_type}\n"
        f"Content-Length: {len(body)}\nConnection: close\n"
    )
    response = raw_request(live_server, head, body)
    assert response.status_code == 201, response.text[:300]
    assert "\\u0000" not in response.text and "\x00" not in response.text
    still_answers(live_server)


LONG_ID = "p" * 300


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", f"/api/presets/characters/{LONG_ID}", None),
        ("GET", f"/api/presets/characters/{LONG_ID}/avatar", None),
        ("POST", f"/api/presets/characters?id={LONG_ID}", {"name": "A"}),
        ("POST", "/api/presets/characters?id=a%00b", {"name": "A"}),
        ("DELETE", f"/api/presets/backgrounds/{LONG_ID}", None),
        ("DELETE", "/api/presets/summaries/a%00b", None),
        ("POST", "/api/presets/backgrounds", {"name": "B", "background_id": LONG_ID}),
        ("POST", "/api/presets/backgrounds", {"name": "B", "background_id": "a\x00b"}),
        ("POST", "/api/presets/summaries", {"summary_id": LONG_ID, "summaries": []}),
        ("POST", "/api/chats", {"character_id": LONG_ID}),
        ("POST", "/api/chats", {"background_id": "a\x00b"}),
    ],
)
def test_a_preset_id_too_long_or_with_nul_is_refused(
    http: httpx.Client, live_server: LiveServer, method: str, url: str, body: Any
) -> None:
    message = refused(http.request(method, url, json=body))
    assert "preset id" in message or "no " in message
    still_answers(live_server)


def test_a_long_character_name_still_makes_a_preset_id(http: httpx.Client) -> None:
    response = http.post("/api/presets/characters", json={"name": "N" * 1000})
    assert response.status_code == 201, response.text[:300]
    preset_id = response.json()["id"]
    assert http.get(f"/api/presets/characters/{preset_id}").status_code == 200


def _json(text: str) -> bytes:
    """``text`` as a JSON string the way a browser writes it: lone surrogates as escapes."""
    return json.dumps(text).encode()


def test_a_lone_surrogate_in_a_message_is_replaced_and_the_text_kept(
    http: httpx.Client, live_server: LiveServer
) -> None:
    chat = http.post("/api/chats", json={"title": "t"}).json()
    body = b'{"text": "cut emoji \\ud83d here, pair \\ud83d\\ude00 kept"}'
    sent = http.post(
        f"/api/chats/{chat['id']}/messages",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert sent.status_code == 202, sent.text[:300]
    assert sent.json()["user_message"]["content"] == "cut emoji \ufffd here, pair \U0001f600 kept"
    view = http.get(f"/api/chats/{chat['id']}").json()
    assert view["messages"][0]["content"].startswith("cut emoji \ufffd here")
    assert http.get(f"/api/chats/{chat['id']}/export").status_code == 200
    still_answers(live_server)


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/chats", b'{"title": "\\udc00", "user_name": "\\ud800x"}'),
        ("/api/presets/backgrounds", b'{"name": "\\udfff"}'),
        ("/api/knowledge/bases", b'{"displayName": "kb \\ud83d", "scope": "local"}'),
        ("/api/workflows/validate", b'{"id": "w\\ud800", "nodes": [], "edges": []}'),
    ],
)
def test_lone_surrogates_in_any_json_body_become_replacement_characters(
    http: httpx.Client, live_server: LiveServer, url: str, body: bytes
) -> None:
    response = http.post(url, content=body, headers={"content-type": "application/json"})
    assert response.status_code < 500, response.text[:300]
    assert "\\ud" not in response.text.lower()
    still_answers(live_server)


_HALVES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.lists(st.one_of(st.text(max_size=5), _HALVES), min_size=1, max_size=8))
def test_a_title_with_surrogate_halves_anywhere_is_kept_with_them_replaced(
    http: httpx.Client, text: list[str]
) -> None:
    title = "x" + "".join(text)
    chat = http.post("/api/chats", json={"title": "t"}).json()
    patched = http.patch(
        f"/api/chats/{chat['id']}",
        content=b'{"title": ' + _json(title) + b"}",
        headers={"content-type": "application/json"},
    )
    assert patched.status_code == 200, patched.text[:300]
    # A high half escaped right before a low half is one character in JSON; the rest go.
    assert patched.json()["title"] == re.sub("[\ud800-\udfff]", "\ufffd", json.loads(_json(title)))


# -- 7: WebSocket frames that used to close the socket ------------------------------------


async def _answers(url: str, frames: list[str | bytes], **kwargs: Any) -> list[dict[str, Any]]:
    """The server's answer to each frame, then to a ``connect`` that shows it still listens."""
    answers = []
    async with websockets.connect(url, max_size=None, **kwargs) as ws:
        json.loads(await ws.recv())
        for frame in [*frames, json.dumps({"type": "connect", "projectId": "still-open"})]:
            await ws.send(frame)
            answers.append(json.loads(await asyncio.wait_for(ws.recv(), timeout=30)))
    return answers


def _deep(depth: int) -> dict[str, Any]:
    inner: Any = "leaf"
    for _ in range(depth):
        inner = {"x": inner}
    return inner  # type: ignore[no-any-return]


def test_hostile_websocket_frames_get_status_error_and_the_socket_stays_open(
    live_server: LiveServer,
) -> None:
    frames: list[str | bytes] = [
        b"\x00\x01binary",
        "[" * 100_000,
        '{"type": "workflow:save", "workflow": ' + json.dumps(_deep(900)) + "}",
        '{"type": "chat:subscribe", "conversationId": ' + '{"a":' * 50_000 + "}",
        '{"type": "workflow:attach", "runId": "r", "afterSeq": ' + "9" * 5000 + "}",
        '{"type": "workflow:load", "workflowId": "\\ud800"}',
        '{"type": "workflow:load", "workflowId": "' + "w" * 300 + '"}',
    ]
    answers = asyncio.run(_answers(live_server.ws_url, frames))
    for answer in answers[:-1]:
        assert (answer["type"], answer["status"]) == ("status", "error"), answer
    assert "binary" in answers[0]["message"]
    assert answers[-1] == {"type": "status", "status": "connected", "message": "project still-open"}
    still_answers(live_server)


def test_a_lone_surrogate_in_a_websocket_message_is_replaced(live_server: LiveServer) -> None:
    async def exchange() -> list[dict[str, Any]]:
        async with websockets.connect(live_server.ws_url) as ws:
            await ws.recv()
            # A subscription is not answered: the connect after it shows it was taken.
            await ws.send('{"type": "chat:subscribe", "conversationId": "\\udfff"}')
            await ws.send('{"type": "connect", "projectId": "p\\ud800"}')
            return [json.loads(await asyncio.wait_for(ws.recv(), timeout=30))]

    answers = asyncio.run(exchange())
    assert answers == [{"type": "status", "status": "connected", "message": "project p\ufffd"}]


# -- 9: the token -------------------------------------------------------------------------


@pytest.fixture
def guarded(tmp_path: Path, start_server: Callable[..., LiveServer]) -> LiveServer:
    return start_server(tmp_path / "home", token=TOKEN)


def test_the_token_in_the_address_works_only_on_a_page_navigation(guarded: LiveServer) -> None:
    with httpx.Client(base_url=guarded.url, timeout=30) as anyone:
        refused(anyone.get(f"/api/health?token={TOKEN}"), 401)
        refused(anyone.post(f"/api/chats?token={TOKEN}", json={}), 401)
        refused(anyone.post(f"/settings?token={TOKEN}"), 401)
        assert "storyloom_token" not in anyone.cookies
    with pytest.raises(websockets.exceptions.InvalidStatus):
        asyncio.run(_answers(f"{guarded.ws_url}?token={TOKEN}", []))
    with httpx.Client(base_url=guarded.url, timeout=30) as browser:
        page = browser.get(f"/chat?token={TOKEN}")
        assert page.status_code == 303 and page.headers["location"] == "/chat"
        assert browser.get("/api/health").status_code == 200


@pytest.mark.parametrize("path", ["//evil.example/", "///evil.example/x", "/\\evil.example/"])
def test_the_token_redirect_never_leaves_the_server(guarded: LiveServer, path: str) -> None:
    response = raw_request(
        guarded, f"GET {path}?token={TOKEN} HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n"
    )
    assert response.status_code == 303
    location = response.headers["location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert urlsplit(location).netloc == ""


def test_a_weak_token_is_refused_in_one_line(tmp_path: Path) -> None:
    result = storyloom("serve", "--token", "a", "--port", "0", home=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "at least 16 characters" in lines[0], result.stderr


# -- 9: the avatar route ------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8


@pytest.mark.parametrize(
    ("file_name", "data", "media_type"),
    [
        ("a.png", PNG, "image/png"),
        ("a.png", JPEG, "image/jpeg"),
        ("a.webp", WEBP, "image/webp"),
        ("a.gif", b"GIF89a" + b"\x00" * 8, "image/gif"),
        ("notes.json", b'{"secret": 1}', None),
        ("a.png", b"<script>alert(1)</script>", None),
    ],
)
def test_the_avatar_route_serves_only_images_with_their_type(
    http: httpx.Client, live_server: LiveServer, file_name: str, data: bytes, media_type: str | None
) -> None:
    saved = http.post("/api/presets/characters", json={"name": "A", "avatar": file_name})
    assert saved.status_code == 201, saved.text
    (live_server.home / PRESETS / "characters" / file_name).write_bytes(data)
    response = http.get(f"/api/presets/characters/{saved.json()['id']}/avatar")
    if media_type is None:
        refused(response, 404)
    else:
        assert response.status_code == 200
        assert response.headers["content-type"] == media_type
        assert response.content == data


# -- 9: sizes, names and the export's file name -------------------------------------------


@pytest.fixture
def small(tmp_path: Path, start_server: Callable[..., LiveServer]) -> LiveServer:
    return start_server(
        tmp_path / "home", limits=RequestLimits(body_bytes=64 * 1024, upload_bytes=128 * 1024)
    )


def test_a_json_body_over_the_limit_is_a_413(small: LiveServer) -> None:
    with httpx.Client(base_url=small.url, timeout=30) as c:
        chat = c.post("/api/chats", json={}).json()
        message = refused(
            c.post(f"/api/chats/{chat['id']}/messages", json={"text": "x" * 100_000}), 413
        )
        assert "64 KB" in message
    still_answers(small)


def test_a_chunked_body_over_the_limit_is_a_413(small: LiveServer) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    with httpx.Client(base_url=small.url, timeout=30) as c:
        chat = c.post("/api/chats", json={}).json()
        response = c.post(
            f"/api/chats/{chat['id']}/messages",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert response.request.headers["transfer-encoding"] == "chunked"
        refused(response, 413)
    still_answers(small)


def test_an_upload_over_the_limit_is_a_413_and_one_under_it_is_read(small: LiveServer) -> None:
    with httpx.Client(base_url=small.url, timeout=30) as c:
        big = c.post("/api/knowledge/import", files={"file": ("big.json", b" " * 300_000)})
        refused(big, 413)
        padded = WORLD_INFO + b" " * 100_000
        assert (
            c.post("/api/knowledge/import", files={"file": ("ok.json", padded)}).status_code == 201
        )
    still_answers(small)


def test_every_upload_route_refuses_a_file_over_the_limit_naming_it(small: LiveServer) -> None:
    huge = ("huge.png", b"\x89PNG\r\n\x1a\n" + b" " * 200_000)
    with httpx.Client(base_url=small.url, timeout=30) as c:
        persona = c.post("/api/personas", json={"name": "Ann"}).json()["id"]
        character = c.post("/api/characters", json={"character": {"name": "Iris"}}).json()["id"]
        for route in (
            "/api/chats/import",
            "/api/personas/import",
            f"/api/personas/{persona}/avatar",
            f"/api/characters/{character}/avatar",
        ):
            message = refused(c.post(route, files={"file": huge}), 413)
            assert "huge.png" in message and "128 KB" in message, route
        group_files = {"group": huge, "chat": ("chat.jsonl", b"{}\n")}
        message = refused(c.post("/api/groups/import", files=group_files), 413)
        assert "huge.png" in message and "128 KB" in message
        # nothing was written
        for route in (f"/api/personas/{persona}/avatar", f"/api/characters/{character}/avatar"):
            assert c.get(route).headers["content-type"].startswith("image/svg+xml"), route
        assert [p["id"] for p in c.get("/api/personas").json()["personas"]] == [persona]
    still_answers(small)


def test_a_declared_length_over_the_default_limit_is_refused_before_the_body(
    live_server: LiveServer,
) -> None:
    # 60 MB announced, nothing sent: the answer comes without waiting for the body.
    response = raw_request(
        live_server,
        "POST /api/chats HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
        f"Content-Length: {60 * 1024 * 1024}\nConnection: close\n",
        until_answered=True,
    )
    assert "16 MB" in refused(response, 413)
    still_answers(live_server)


def send_whole_then_read(server: LiveServer, path: str, content_type: str, body: bytes) -> str:
    """POST ``body`` as most clients do: all of it first, the answer after (a server that
    stops reading mid-body leaves such a client a reset connection, or hanging)."""
    address = urlsplit(server.url)
    connection = HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        assert response.status == 413, response.read()[:300]
        return str(json.loads(response.read())["error"]["message"])
    finally:
        connection.close()


@pytest.mark.parametrize("route", ["/api/chats/import", "/api/knowledge/import"])
def test_a_60_mb_upload_sent_whole_gets_its_413(live_server: LiveServer, route: str) -> None:
    content_type, body = multipart(b"big.jsonl", b"x" * (60 * 1024 * 1024))
    message = send_whole_then_read(live_server, route, content_type, body)
    assert "50 MB" in message
    still_answers(live_server)


def test_a_20_mb_json_body_sent_whole_gets_its_413(live_server: LiveServer) -> None:
    body = json.dumps({"title": "x" * (20 * 1024 * 1024)}).encode()
    assert "16 MB" in send_whole_then_read(live_server, "/api/chats", "application/json", body)
    still_answers(live_server)


def test_a_body_calling_itself_an_upload_has_the_body_limit_where_no_upload_is_taken(
    small: LiveServer,
) -> None:
    # 100 KB: over the body limit (64 KB), under the upload limit (128 KB). Only the
    # routes that take an upload may have the upload limit, whatever the body claims.
    content_type, body = multipart(b"a.json", b"x" * 100_000)
    document = httpx.get(f"{small.url}/openapi.json", timeout=30).json()
    tried = 0
    for template, operations in document["paths"].items():
        path = re.sub(r"\{[^}]+\}", "x", template)
        for method, operation in operations.items():
            content = (operation.get("requestBody") or {}).get("content", {})
            if not content or "multipart/form-data" in content:
                continue
            with httpx.Client(base_url=small.url, timeout=30) as c:
                response = c.request(
                    method, path, content=body, headers={"content-type": content_type}
                )
            assert response.status_code == 413, (method, template, response.text[:200])
            assert "64 KB" in refused(response, 413)
            tried += 1
    assert tried > 40
    still_answers(small)


def test_serve_takes_its_body_limit_from_the_command_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "STORYLOOM_HOME": str(tmp_path)}
    command = [
        *(sys.executable, "-m", "storyloom", "serve", "--port", "0", "--no-token"),
        *("--max-body-mb", "1"),
    ]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as server:
        try:
            assert server.stdout is not None
            address = re.search(r"serving (http://\S+?)/ ", server.stdout.readline())
            assert address is not None
            url = address.group(1)
            refused(httpx.post(f"{url}/api/chats", json={"title": "x" * 2 * 1024 * 1024}), 413)
            assert httpx.post(f"{url}/api/chats", json={"title": "x"}).status_code == 201
        finally:
            server.terminate()


@pytest.mark.parametrize(
    ("url", "field", "size"),
    [
        ("/api/chats", "title", MAX_TITLE_CHARS + 1),
        ("/api/chats", "user_name", 201),
        ("/api/knowledge/bases", "displayName", 201),
    ],
)
def test_titles_and_names_have_a_length_limit(
    http: httpx.Client, url: str, field: str, size: int
) -> None:
    response = http.post(url, json={field: "t" * size})
    refused(response, 422)
    assert response.json()["error"]["problems"][0]["field"] == field


def test_the_export_names_its_file_safely_whatever_the_title(http: httpx.Client) -> None:
    title = 'é"; filename=evil.sh\r\n' + "長" * (MAX_TITLE_CHARS - 30)
    chat = http.post("/api/chats", json={"title": title[:MAX_TITLE_CHARS]}).json()
    response = http.get(f"/api/chats/{chat['id']}/export")
    assert response.status_code == 200
    disposition = response.headers["content-disposition"]
    assert len(disposition) < 1000
    plain = re.fullmatch(r'attachment; filename="([ -~]*)"; filename\*=UTF-8\'\'(\S+)', disposition)
    assert plain is not None, disposition
    assert '"' not in plain.group(1) and plain.group(1).endswith(".jsonl")
    assert plain.group(2).endswith(".jsonl")


# -- 9: no third-party script in storyloom's origin ----------------------------------------


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_no_api_docs_page_loads_scripts_from_a_cdn(http: httpx.Client, path: str) -> None:
    response = http.get(path)
    assert "cdn.jsdelivr.net" not in response.text
    assert "swagger-ui" not in response.text.lower() and "redoc" not in response.text.lower()
    assert http.get("/openapi.json").status_code == 200


def test_a_huge_keyword_upload_is_refused_and_the_server_lives_on(tmp_path: Path) -> None:
    # A 700,000-character key once overflowed the keyword automaton's C stack and took
    # the whole process down (SIGSEGV): only a real server process shows it survives.
    from storyloom.testing.st_documents import world_info_document, world_info_entry

    book = world_info_document([world_info_entry(0, ["k" * 700_000], "the content")])
    upload = json.dumps(book).encode()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "STORYLOOM_HOME": str(tmp_path)}
    command = [sys.executable, "-m", "storyloom", "serve", "--port", "0", "--no-token"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as server:
        try:
            assert server.stdout is not None
            address = re.search(r"serving (http://\S+?)/ ", server.stdout.readline())
            assert address is not None
            url = address.group(1)
            for route in ("/api/knowledge/import", "/api/chats/import"):
                answer = httpx.post(
                    f"{url}{route}", files={"file": ("huge.json", upload)}, timeout=60
                )
                assert "key" in refused(answer, 422)
            assert server.poll() is None
            assert httpx.get(f"{url}/api/health", timeout=30).status_code == 200
        finally:
            server.terminate()
