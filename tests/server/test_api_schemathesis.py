"""Property-based testing of the whole REST API from its OpenAPI document (schemathesis).

A real ``storyloom serve`` runs in its own process on 127.0.0.1 with a temporary data
directory and a project holding a little of everything (a KB, a character with its avatar,
conversations, a workflow and a finished run, a background and a summary), so that routes
with ids have something to find. The OpenAPI document is the code's own (the one the server
serves at ``/openapi.json``, checked equal); schemathesis sends every operation its
examples, its coverage cases (boundary and invalid values of each field) and
``STORYLOOM_API_FUZZ_EXAMPLES`` random cases (default 20, a fixed seed; ``make fuzz`` runs
a longer campaign with a new seed, or ``STORYLOOM_API_FUZZ_SEED``). Each answer must not be
a 5xx and must match the schema documented for its status; the server must still be alive
after each request. A failure shows the server's traceback and the seed.

Everything stays on this computer: the schema's base URL is checked to be 127.0.0.1, and
fuzzed settings are confined before they are sent (every model URL points at the scripted
LLM server on 127.0.0.1, every global KB folder lies in the temporary directory), so the
server never calls out, never reads outside the test's folders, and the settings are put
back after each change so that later operations see the configured models.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case

from storyloom.core.settings import (
    ChatEndpointUpdate,
    EmbeddingEndpointUpdate,
    KnowledgeSettings,
    ServerSettings,
    SettingsUpdate,
)
from storyloom.project.project_file import init_project
from storyloom.server.app import create_app
from storyloom.testing.replay_server import ReplayLLMServer

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sillytavern"
HOST = "127.0.0.1"

# The short campaign CI runs; a longer one: STORYLOOM_API_FUZZ_EXAMPLES=300 (``make fuzz``).
FUZZ_EXAMPLES = int(os.environ.get("STORYLOOM_API_FUZZ_EXAMPLES", "20"))
# CI repeats the same cases; a long campaign draws new ones unless given a seed.
_SEED = os.environ.get("STORYLOOM_API_FUZZ_SEED")
SEED: int | None = (
    int(_SEED) if _SEED else (12 if "STORYLOOM_API_FUZZ_EXAMPLES" not in os.environ else None)
)
REQUEST_TIMEOUT_S = 30

WORKFLOW: dict[str, Any] = {
    "id": "story",
    "name": "Story",
    "nodes": [
        {"id": "prompt", "type": "core:TextInput", "config": {"text": "Begin"}},
        {"id": "writer", "type": "llm:Chat", "position": {"x": 300, "y": 0}},
    ],
    "edges": [
        {"source": "prompt", "sourceSlot": "text", "target": "writer", "targetSlot": "prompt"}
    ],
}


@dataclass
class FuzzServer:
    """``storyloom serve`` in its own process, and the ids of what its project holds."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    root: Path
    llm_url: str
    endpoint: dict[str, Any]
    known_ids: dict[str, str] = field(default_factory=dict)
    log_seen: int = 0

    reported: set[str] = field(default_factory=set)

    def new_log(self) -> str:
        """What the server wrote since the last call (its tracebacks)."""
        data = self.log.read_bytes()
        text = data[self.log_seen :].decode("utf-8", "replace")
        self.log_seen = len(data)
        return text

    def report_new_log(self, case: Case[Any], status_code: int) -> None:
        """Print what the server logged for this case, each distinct error once: pytest
        shows it under a failing operation (the answer of a 5xx holds no traceback)."""
        if status_code >= 500:
            # The traceback is logged just after the 500 is sent.
            deadline = time.monotonic() + 5
            while self.log.stat().st_size <= self.log_seen and time.monotonic() < deadline:
                time.sleep(0.02)
        text = self.new_log().strip()
        last_line = text.splitlines()[-1] if text else ""
        if not text or last_line in self.reported:
            return
        self.reported.add(last_line)
        print(f"--- {case.method} {case.formatted_path}: storyloom serve logged\n{text}")
        print(f"--- replay this campaign with STORYLOOM_API_FUZZ_SEED={schema.config.seed}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _serve(home: Path, project: Path, log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STORYLOOM_")}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "storyloom", "serve", "--host", HOST, "--port", str(port),
             "--home", str(home), "--project", str(project), "--no-token"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            pytest.fail(f"storyloom serve exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/api/health", timeout=5).status_code == 200:
                return url, process
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"storyloom serve did not start:\n{log.read_text()}")
        time.sleep(0.1)


def _created(response: httpx.Response) -> Any:
    assert response.status_code in (200, 201, 202), response.text
    return response.json()


def _seed_project(api: httpx.Client) -> dict[str, str]:
    """A little of everything, made through the API; answers the ids by path parameter."""
    lanternfall = (FIXTURES / "world_info_lanternfall_v1.18.json").read_bytes()
    kb = _created(api.post("/api/knowledge/import", files={"file": ("lf.json", lanternfall)}))
    card = (FIXTURES / "card_maren_v2_v3.png").read_bytes()
    imported = _created(api.post("/api/chats/import", files={"file": ("maren.png", card)}))
    conversation_id = imported["conversation"]["id"]
    view = _created(api.get(f"/api/chats/{conversation_id}"))
    _created(api.put("/api/workflows/story", json=WORKFLOW))
    run = _created(api.post("/api/workflows/story/runs", json={}))
    deadline = time.monotonic() + 30
    while _created(api.get(f"/api/workflow-runs/{run['runId']}"))["status"] == "running":
        assert time.monotonic() < deadline, "the seed run did not finish"
        time.sleep(0.05)
    _created(api.post("/api/presets/backgrounds", json={"id": "harbour", "name": "Harbour"}))
    # What continue-from-summary starts from.
    _created(api.post(f"/api/chats/{conversation_id}/summarise"))
    return {
        "kb_id": kb["created"][0]["kb_id"],
        "conversation_id": conversation_id,
        "message_id": view["messages"][-1]["id"],
        "character_id": imported["character_id"],
        "workflow_id": "story",
        "node_id": "writer",
        "run_id": run["runId"],
    }


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzServer]:
    root = tmp_path_factory.mktemp("api-fuzz")
    home = root / "home"
    home.mkdir()
    project = root / "project"
    init_project(project)
    # models=[]: the scripted server answers any model name a fuzzed setting asks for.
    with ReplayLLMServer(models=[]) as llm:
        endpoint = {"base_url": llm.url, "model": "test-model", "max_retries": 0}
        (home / "settings.json").write_text(
            json.dumps({"user_llm": endpoint, "agent_llm": endpoint})
        )
        log = root / "server.log"
        url, process = _serve(home, project, log)
        try:
            server = FuzzServer(url, process, log, root, llm.url, endpoint)
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as api:
                assert api.get("/openapi.json").json() == API_DOCUMENT
                server.known_ids = _seed_project(api)
            server.new_log()
            yield server
        finally:
            process.kill()
            process.wait(timeout=10)


def _confined_folder(root: Path, value: Any) -> Any:
    """A fuzzed global KB folder moved inside ``root``, the odd characters kept."""
    if not isinstance(value, str):
        return value
    return str(root / "global-kbs" / value.replace("/", "_").replace("..", "__"))


def _confine_settings(server: FuzzServer, body: Any) -> None:
    """Point every model URL at the scripted server and every folder into the temp dir."""
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "base_url" and isinstance(value, str) and value.strip():
                body[key] = server.llm_url
            elif key == "global_folders" and isinstance(value, list):
                body[key] = [_confined_folder(server.root, item) for item in value]
            else:
                _confine_settings(server, value)
    elif isinstance(body, list):
        for item in body:
            _confine_settings(server, item)


def _confine_mcp_server(body: Any) -> None:
    """A fuzzed MCP server never starts a program or reaches a real address: its command
    names no file, its URL a closed loopback port; each fails at once."""
    if isinstance(body, dict):
        if isinstance(body.get("command"), str):
            body["command"] = "/nonexistent/storyloom-fuzz-mcp"
        if isinstance(body.get("url"), str) and body["url"].startswith(("http://", "https://")):
            body["url"] = "http://127.0.0.1:9/mcp"
        if isinstance(body.get("timeoutS"), int | float) and body["timeoutS"] > 5:
            body["timeoutS"] = 5


def _use_known_ids(server: FuzzServer, case: Case[Any]) -> None:
    """Two cases in three name things that exist, so handlers run past the 404.

    Deletes keep their drawn ids: a delete of the seeded data would leave the operations
    after it nothing to find. The choice hangs on the drawn ids, so a case replays alike.
    """
    params = case.path_parameters
    if not params or case.method.upper() == "DELETE":
        return
    if zlib.crc32(repr(sorted(params.items())).encode("utf-8", "replace")) % 3 == 0:
        return
    for name in params:
        if name in server.known_ids:
            params[name] = server.known_ids[name]


def _every_setting_as_seeded(server: FuzzServer) -> dict[str, Any]:
    """Each section in full (an update merges into what is stored)."""
    endpoint = ChatEndpointUpdate(**server.endpoint)
    update = SettingsUpdate(
        server=ServerSettings(),
        user_llm=endpoint,
        agent_llm=endpoint,
        embedding=EmbeddingEndpointUpdate(),
        knowledge=KnowledgeSettings(),
    )
    return update.model_dump(mode="json")


def _campaign_config() -> schemathesis.Config:
    checks: dict[str, Any] = {"enabled": False}
    for name in ("not_a_server_error", "response_schema_conformance"):
        checks[name] = {"enabled": True}
    config: dict[str, Any] = {
        "checks": checks,
        # Each operation on its own: examples, boundary and invalid values, random cases.
        "phases": {"stateful": {"enabled": False}},
        "generation": {"max-examples": FUZZ_EXAMPLES},
        "request-timeout": REQUEST_TIMEOUT_S,
    }
    if SEED is not None:
        config["seed"] = SEED
    return schemathesis.Config.from_dict(config)


def _api_document() -> dict[str, Any]:
    """The OpenAPI document of the code under test, built as ``storyloom openapi`` builds it
    (the served one is checked to be equal once the server runs)."""
    with tempfile.TemporaryDirectory() as tmp:
        document: dict[str, Any] = create_app(Path(tmp), environ={}).openapi()
    return document


API_DOCUMENT = _api_document()
schema = schemathesis.openapi.from_dict(API_DOCUMENT, config=_campaign_config())


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_no_operation_answers_a_server_error_or_off_schema(
    case: Case[Any], fuzz_server: FuzzServer
) -> None:
    # A connection is an endpoint too: saved, tested or listed for its models, it calls out.
    is_settings = case.path in ("/api/settings", "/api/settings/test") or case.path.startswith(
        "/api/connections/"
    )
    if is_settings:
        _confine_settings(fuzz_server, case.body)
    if case.path.startswith("/api/mcp/servers/"):
        _confine_mcp_server(case.body)
    _use_known_ids(fuzz_server, case)
    # Only ever the test's own server on 127.0.0.1.
    assert urlparse(fuzz_server.url).hostname == HOST
    response = case.call(base_url=fuzz_server.url, timeout=REQUEST_TIMEOUT_S)
    fuzz_server.report_new_log(case, response.status_code)
    try:
        case.validate_response(response)
    finally:
        if (
            case.method.upper() == "PUT"
            and case.path == "/api/settings"
            and response.status_code == 200
        ):
            # Later operations need the configured models back.
            httpx.put(
                f"{fuzz_server.url}/api/settings",
                json=_every_setting_as_seeded(fuzz_server),
                timeout=REQUEST_TIMEOUT_S,
            ).raise_for_status()
    exit_code = fuzz_server.process.poll()
    assert exit_code is None, (
        f"storyloom serve died (exit {exit_code}) after {case.method} {case.formatted_path}:\n"
        f"{fuzz_server.new_log()}"
    )


# -- what the campaign found, kept as plain cases -------------------------------------------


def test_a_null_settings_section_leaves_that_section_as_it_was(fuzz_server: FuzzServer) -> None:
    before = httpx.get(f"{fuzz_server.url}/api/settings").json()
    response = httpx.put(
        f"{fuzz_server.url}/api/settings",
        json={"agent_llm": None, "knowledge": None, "server": {"port": 8421}},
    )
    assert response.status_code == 200, response.text
    after = response.json()
    assert after["agent_llm"] == before["agent_llm"]
    assert after["knowledge"] == before["knowledge"]
    assert after["server"]["port"] == 8421
    httpx.put(f"{fuzz_server.url}/api/settings", json=_every_setting_as_seeded(fuzz_server))


@pytest.mark.parametrize("history_id", [2**63, -(2**63) - 1, 10**40])
def test_a_history_id_no_database_row_can_have_is_not_found(
    fuzz_server: FuzzServer, history_id: int
) -> None:
    response = httpx.put(
        f"{fuzz_server.url}/api/workflows/story/nodes/writer/freeze",
        json={"historyId": history_id},
    )
    assert response.status_code == 404, response.text
    assert "no history entry" in response.json()["error"]["message"]
