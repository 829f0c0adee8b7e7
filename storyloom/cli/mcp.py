"""``storyloom mcp ...``: storyloom as an MCP server for other hosts, and the external MCP
servers storyloom uses.

``storyloom mcp serve`` speaks MCP on stdin/stdout (what Claude Desktop, editors and
other MCP hosts start); nothing else is written to stdout. The web server offers the
same over Streamable HTTP at ``/mcp``.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from storyloom.cli.context import opened_tool_host
from storyloom.cli.options import JsonOption, ProjectOption, run_async

if TYPE_CHECKING:
    pass

mcp_app = typer.Typer(
    help="MCP: serve storyloom's tools to MCP hosts; check the MCP servers storyloom uses.",
    no_args_is_help=True,
)

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        "--home",
        help="Data directory (default: $STORYLOOM_HOME, else ~/.storyloom).",
        show_default=False,
    ),
]
NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        help="Serve only the tools of this namespace, under their bare names "
        "(e.g. --namespace my-plugin serves my-plugin:search as 'search').",
        show_default=False,
    ),
]


@mcp_app.command("serve")
def serve(
    project: ProjectOption = None,
    home: DataDirOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Serve storyloom's tools and knowledge bases over MCP on stdin/stdout.

    Tools are the enabled ones the tool policy does not deny; a tool whose policy is
    'ask' is listed but its calls are refused (MCP cannot ask you): allow it in the
    tool policy to call it from an MCP host. Every call is in the audit log.
    """
    from storyloom.tools.mcp_server import serve_stdio

    async def run() -> None:
        async with opened_tool_host(home, project) as host:
            await serve_stdio(host, namespace=namespace)

    with contextlib.suppress(KeyboardInterrupt):
        run_async(run())


@mcp_app.command("servers")
def servers(
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: DataDirOption = None,
) -> None:
    """Connect to each configured MCP server (mcp_servers.json of the project and of the
    data directory) and print its status and tools."""

    async def run() -> list[dict[str, object]]:
        async with opened_tool_host(home, project) as host:
            await host.mcp.start()
            with contextlib.suppress(TimeoutError):
                await host.mcp.wait_ready()
            listed: list[dict[str, object]] = [asdict(s) for s in host.mcp.status()]
            listed.extend({"problem": asdict(p)} for p in host.mcp.problems)
            return listed

    found = run_async(run())
    if as_json:
        typer.echo(json.dumps(found, ensure_ascii=False, indent=2))
        return
    if not found:
        typer.echo("no MCP servers configured (mcp_servers.json)")
    for item in found:
        if "problem" in item:
            typer.echo(f"problem: {item['problem']}")
            continue
        error = f" ({item['error']})" if item.get("error") else ""
        typer.echo(
            f"{item['name']} [{item['scope']}, {item['transport']}]: {item['status']}{error}"
        )
        for tool in item["tools"]:  # type: ignore[attr-defined]
            typer.echo(f"  {tool}")
