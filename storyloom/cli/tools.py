"""``storyloom tools ...``: list the tools, call one, and see what a model output asks for.

A call typed here is the user's own: it goes through the same ToolManager, policy and
audit log as an agent's, with ``ask`` counting as allowed (the person typing is the one
who would be asked) while ``deny`` still denies.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from storyloom.cli.context import opened_tool_host
from storyloom.cli.options import HomeOption, JsonOption, ProjectOption, fail, run_async

if TYPE_CHECKING:
    from storyloom.tools.tool_definition import ToolEntry
    from storyloom.tools.tool_host import ToolHost

tools_app = typer.Typer(
    help="Tools: list them, call one, parse a model output for tool calls.",
    no_args_is_help=True,
)

MCP_WAIT_S = 15.0


@asynccontextmanager
async def _opened(home: Path | None, project: Path | None, *, mcp: bool) -> AsyncIterator[ToolHost]:
    async with opened_tool_host(home, project) as host:
        if mcp:
            await host.start()
            try:
                await host.mcp.wait_ready(MCP_WAIT_S)
            except TimeoutError:
                typer.echo("storyloom: some MCP servers did not answer in time", err=True)
        yield host


def _info(entry: ToolEntry) -> dict[str, Any]:
    definition = entry.definition
    return {
        "id": entry.id,
        "displayName": definition.display_name,
        "description": definition.description,
        "parameters": definition.parameters,
        "implementation": entry.implementation_type,
        "source": entry.source,
        "plugin": entry.plugin,
        "available": entry.available,
        "unavailableReason": entry.unavailable_reason,
    }


@tools_app.command("list")
def list_tools(
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """List every tool: id, implementation, source and whether it can run."""

    async def collect() -> tuple[list[dict[str, Any]], list[str]]:
        async with _opened(home, project, mcp=True) as host:
            infos = [_info(entry) for entry in host.manager.entries()]
            problems = [f"{p.where}: {p.reason}" for p in host.registry.problems()]
            problems += (
                [f"{p.folder}/{p.file}: {p.field}: {p.reason}" for p in host.plugins.problems]
                if host.plugins
                else []
            )
            return infos, problems

    infos, problems = run_async(collect())
    for problem in problems:
        typer.echo(f"storyloom: {problem}", err=True)
    if as_json:
        typer.echo(json.dumps(infos, ensure_ascii=False, indent=2))
        return
    for info in infos:
        state = "" if info["available"] else f"  [unavailable: {info['unavailableReason']}]"
        typer.echo(f"{info['id']}  ({info['implementation']}, {info['source']}){state}")
        params = info["parameters"].get("properties", {})
        required = set(info["parameters"].get("required", []))
        if params:
            shown = ", ".join(f"{n}{'' if n in required else '?'}" for n in params)
            typer.echo(f"    ({shown})")


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"--args is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise fail('--args must be a JSON object, e.g. \'{"notation": "2d6"}\'')
    return value


@tools_app.command("call")
def call(
    tool_id: Annotated[str, typer.Argument(metavar="ID", help="Tool id, e.g. chat:RollDice")],
    args: Annotated[
        str, typer.Option("--args", help="The arguments as one JSON object.", show_default=False)
    ] = "{}",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds before giving up.")] = 60.0,
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Call a tool as yourself (policy and audit apply; exits 1 when it fails or is denied)."""
    from storyloom.tools.tool_manager import ToolCallContext, ToolCaller, ToolCallResult
    from storyloom.tools.tool_policy import KbAccess, ToolPolicy

    arguments = _arguments(args)

    async def run() -> ToolCallResult:
        async with _opened(home, project, mcp=tool_id.startswith("mcp.")) as host:
            context = ToolCallContext(
                caller=ToolCaller("cli", "cli"),
                # The global policy still applies; the person's own call adds no rule.
                policy=ToolPolicy(default="allow"),
                kb_access=KbAccess(read=["*"], write=["*"]),
                timeout_s=timeout,
            )
            return await host.manager.call(tool_id, arguments, context)

    result = run_async(run())
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    elif result.ok:
        value = result.result
        typer.echo(
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
        )
    if not result.ok:
        if not as_json:
            typer.echo(f"storyloom: {result.decision}: {result.error}", err=True)
        raise typer.Exit(1)


@tools_app.command("parse")
def parse(
    file: Annotated[
        str, typer.Argument(metavar="[FILE|-]", help="A model output; '-' or nothing: stdin.")
    ] = "-",
    as_json: JsonOption = False,
) -> None:
    """Print the tool calls a model output contains (what would run, in order), the text
    left for the reader and the problems (fenced, quoted or unterminated blocks)."""
    from storyloom.tools.tam import parse_tam

    if file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise fail(exc) from None
        except UnicodeDecodeError as exc:
            raise fail(f"{file}: not UTF-8 text ({exc.reason})") from None
    parsed = parse_tam(text)
    if as_json:
        typer.echo(json.dumps(parsed.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    for found in parsed.calls:
        typer.echo(f"step {found.step}: {found.tool}")
        for key, value in found.arguments.items():
            typer.echo(f"  {key}: {value}")
    if not parsed.calls:
        typer.echo("(no tool calls)")
    typer.echo("--- text ---")
    typer.echo(parsed.text)
    for problem in parsed.problems:
        typer.echo(f"storyloom: at {problem.offset}: {problem.message}", err=True)
