"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
tests/tools/mcp_npm) against storyloom's Streamable HTTP server, uvicorn on loopback.

storyloom's server declares two capabilities, tools and resources. Every server scenario
the suite lists is either run here (and must have no failing check) or excluded below
with the reason; a scenario a newer suite adds fails the listing test until it is sorted.
The suite's scenarios call fixture tools by name (``test_simple_text``...): the test
gives them to a real ToolHost as service tools of a ``conformance`` namespace through the
plugin hook ``storyloom_tools``, served under bare names (``mcp_http_app(namespace=...)``);
the global tool policy in settings.json allows them and denies everything else.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storyloom.tools.mcp_server import mcp_http_app
from tests.tools.mcp_support import (
    CONFORMANCE_JS,
    MCP_NPM,
    NODE20_SHIM,
    make_tool_host,
    require_npm_package,
    serve_mcp,
)
from tests.tools.tool_support import service_tool

RUN = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "json-schema-2020-12",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "resources-list",
    "dns-rebinding-protection",
]

NOT_DECLARED = "storyloom's server does not declare this capability"
MEDIA = (
    "storyloom tools return JSON values (seed 6.3), served as text and structured "
    "content; they produce no image, audio or embedded-resource content"
)
FIXTURE_URI = (
    "reads the suite's fixture URI (test://...); storyloom's resources are its knowledge "
    "bases at storyloom://kb/<id>, read in test_mcp_server.py"
)
EXCLUDED = {
    "logging-set-level": f"logging: {NOT_DECLARED}",
    "tools-call-with-logging": f"logging: {NOT_DECLARED}",
    "completion-complete": f"completions: {NOT_DECLARED}",
    "tools-call-with-progress": "storyloom tools report no progress notifications",
    "tools-call-sampling": "sampling is a client capability storyloom's tools do not use",
    "tools-call-elicitation": "elicitation is a client capability storyloom's tools do not use",
    "elicitation-sep1034-defaults": "elicitation: storyloom's tools do not use it",
    "elicitation-sep1330-enums": "elicitation: storyloom's tools do not use it",
    "tools-call-image": MEDIA,
    "tools-call-audio": MEDIA,
    "tools-call-embedded-resource": MEDIA,
    "tools-call-mixed-content": MEDIA,
    "resources-read-text": FIXTURE_URI,
    "resources-read-binary": FIXTURE_URI,
    "resources-templates-read": f"resource templates: {NOT_DECLARED}",
    "resources-subscribe": f"resources.subscribe: {NOT_DECLARED}",
    "resources-unsubscribe": f"resources.subscribe: {NOT_DECLARED}",
    "prompts-list": f"prompts: {NOT_DECLARED}",
    "prompts-get-simple": f"prompts: {NOT_DECLARED}",
    "prompts-get-with-args": f"prompts: {NOT_DECLARED}",
    "prompts-get-embedded-resource": f"prompts: {NOT_DECLARED}",
    "prompts-get-with-image": f"prompts: {NOT_DECLARED}",
}

SCHEMA_2020 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def _suite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    require_npm_package(CONFORMANCE_JS)
    # The shim gives Node 20 the fs.globSync the suite imports (used by tier-check only).
    return subprocess.run(
        ["node", "--import", str(NODE20_SHIM), str(CONFORMANCE_JS), *args],
        cwd=MCP_NPM,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _simple_text(_arguments: dict[str, Any], _context: Any) -> str:
    return "This is a simple text response for testing."


def _error(_arguments: dict[str, Any], _context: Any) -> Any:
    raise RuntimeError("This tool intentionally returns an error for testing")


def _reconnection(_arguments: dict[str, Any], _context: Any) -> str:
    return "Reconnection test completed successfully"


def _schema_tool(arguments: dict[str, Any], _context: Any) -> Any:
    return {"received": arguments}


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tools = [
        service_tool("conformance:test_simple_text", _simple_text, description="Simple text"),
        service_tool("conformance:test_error_handling", _error, description="Always an error"),
        service_tool("conformance:test_reconnection", _reconnection, description="Reconnection"),
        service_tool(
            "conformance:json_schema_2020_12_tool",
            _schema_tool,
            description="JSON Schema 2020-12 keywords kept as written",
            parameters=SCHEMA_2020,
        ),
    ]
    policy = {
        "rules": [
            {"tool": "conformance:*", "action": "allow"},
            {"tool": "kb:*", "action": "allow"},
        ],
        "default": "deny",
    }
    host = make_tool_host(tmp_path_factory.mktemp("conformance"), tools, policy)
    assert host.knowledge is not None
    from storyloom.knowledge.caiu import CAIU
    from storyloom.knowledge.knowledge_base import KnowledgeBase

    host.knowledge.create(
        KnowledgeBase(
            kb_id="kb-conformance",
            kb_displayName="Conformance lore",
            entries=[CAIU.model_validate({"id": "e1", "content": {"text": "A fact."}})],
        ),
        "local",
    )
    try:
        with serve_mcp(mcp_http_app(host, namespace="conformance")) as url:
            yield url
    finally:
        host.database.close()


def test_every_server_scenario_of_the_suite_is_run_or_excluded_with_a_reason() -> None:
    listed = _suite("list", "--server")
    assert listed.returncode == 0, listed.stderr
    names = {
        line.strip()[2:].split(" ")[0]
        for line in listed.stdout.splitlines()
        if line.strip().startswith("- ")
    }
    assert names, listed.stdout
    assert names == set(RUN) | set(EXCLUDED)
    assert not set(RUN) & set(EXCLUDED)


@pytest.mark.parametrize("scenario", RUN)
def test_conformance_scenario_passes(scenario: str, server_url: str, tmp_path: Path) -> None:
    out = tmp_path / "results"
    run = _suite("server", "--url", server_url, "--scenario", scenario, "-o", str(out))
    checks_files = sorted(out.glob("*/checks.json"))
    assert checks_files, f"{scenario}: no results\n{run.stdout}\n{run.stderr}"
    checks = json.loads(checks_files[0].read_text(encoding="utf-8"))
    counts: dict[str, int] = {}
    for check in checks:
        counts[check["status"]] = counts.get(check["status"], 0) + 1
    print(f"conformance {scenario}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    failures = [c for c in checks if c["status"] == "FAILURE"]
    assert not failures, json.dumps(failures, indent=1)
    assert run.returncode == 0, run.stdout + run.stderr
    assert counts.get("SUCCESS", 0) + counts.get("WARNING", 0) > 0
