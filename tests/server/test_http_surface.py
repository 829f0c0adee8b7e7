import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets


def test_root_serves_html(client: httpx.Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]
    assert "storyloom" in response.text.lower()


def test_client_side_routes_serve_the_app(client: httpx.Client) -> None:
    assert client.get("/settings").headers["content-type"].startswith("text/html")


def test_unknown_api_path_is_a_json_404(client: httpx.Client) -> None:
    response = client.get("/api/nothing-here")
    assert response.status_code == 404
    assert "error" in response.json()


async def _ws_exchange(url: str, sends: list[str], **kwargs: object) -> list[dict[str, object]]:
    received = []
    async with websockets.connect(url, **kwargs) as ws:  # type: ignore[arg-type]
        received.append(json.loads(await ws.recv()))
        for text in sends:
            await ws.send(text)
            received.append(json.loads(await ws.recv()))
    return received


def test_websocket_greets_with_status_and_answers_bad_messages(live_server: Any) -> None:
    messages = asyncio.run(
        _ws_exchange(
            live_server.ws_url,
            [json.dumps({"type": "connect", "projectId": "demo"}), "not json", '{"type": "nope"}'],
        )
    )
    assert messages[0]["type"] == "status" and messages[0]["status"] == "connected"
    assert messages[1] == {"type": "status", "status": "connected", "message": "project demo"}
    assert messages[2]["status"] == "error"
    assert messages[3]["status"] == "error"
    assert "nope" in str(messages[3]["message"])


@pytest.fixture
def guarded(tmp_path: Path, start_server: Any) -> Any:
    return start_server(tmp_path / "home", token="s3cret-token")


def test_token_is_required_on_every_request(guarded: Any) -> None:
    assert httpx.get(f"{guarded.url}/api/health").status_code == 401
    assert httpx.get(f"{guarded.url}/").status_code == 401
    ok = httpx.get(f"{guarded.url}/api/health", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200
    with pytest.raises(websockets.exceptions.InvalidStatus):
        asyncio.run(_ws_exchange(guarded.ws_url, []))


def test_token_in_address_sets_cookie_for_page_and_websocket(guarded: Any) -> None:
    with httpx.Client(base_url=guarded.url) as browser:
        first = browser.get("/settings?token=s3cret-token&tab=1")
        assert first.status_code == 303
        assert first.headers["location"] == "/settings?tab=1"
        assert "HttpOnly" in first.headers["set-cookie"]
        assert browser.get("/api/health").status_code == 200
        cookie = f"storyloom_token={browser.cookies['storyloom_token']}"
    greeting = asyncio.run(_ws_exchange(guarded.ws_url, [], additional_headers={"Cookie": cookie}))
    assert greeting[0]["status"] == "connected"


def test_other_sites_cannot_post_through_the_browser(client: httpx.Client) -> None:
    response = client.post(
        "/api/settings/test",
        json={"role": "user_llm", "endpoint": {"base_url": "https://evil.example/v1"}},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403
    assert "evil.example" in response.json()["error"]["message"]


def test_own_origin_may_post(client: httpx.Client, live_server: Any) -> None:
    response = client.put("/api/settings", json={}, headers={"Origin": live_server.url})
    assert response.status_code == 200


def test_dns_rebinding_host_is_refused(client: httpx.Client) -> None:
    response = client.get("/api/settings", headers={"Host": "attacker.example:8420"})
    assert response.status_code == 403


def test_websocket_from_another_site_is_refused(live_server: Any) -> None:
    with pytest.raises(websockets.exceptions.InvalidStatus):
        asyncio.run(_ws_exchange(live_server.ws_url, [], origin="https://evil.example"))
    own = asyncio.run(_ws_exchange(live_server.ws_url, [], origin=live_server.url))
    assert own[0]["status"] == "connected"
