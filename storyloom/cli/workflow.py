"""``storyloom workflow ...``: run and check workflow files from the command line."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic_core import to_jsonable_python

from storyloom.cli.context import project_or_cwd
from storyloom.cli.options import HomeOption, JsonOption, ProjectOption, fail
from storyloom.core.errors import FieldProblem, FileFormatError, StoryloomError

if TYPE_CHECKING:
    from storyloom.tools.approvals import PendingApproval
    from storyloom.workflow.events import RunEvent
    from storyloom.workflow.runner import RunResult
    from storyloom.workflow.validation import WorkflowProblem
    from storyloom.workflow.workflow_file import Workflow

workflow_app = typer.Typer(
    help="Workflows: run, validate, list node types, print the file schema.",
    no_args_is_help=True,
)

FileArgument = Annotated[Path, typer.Argument(help="A workflow file (workflows/<id>.json).")]


def _workflow_project(project: Path | None, file: Path) -> Path | None:
    """``--project``; else the project the file sits in (``<project>/workflows/x.json``);
    else the current folder when it is a project."""
    from storyloom.project.project_file import PROJECT_FILE
    from storyloom.workflow.workflow_file import WORKFLOWS_DIR

    if project is not None:
        return project
    parent = file.resolve().parent
    if parent.name == WORKFLOWS_DIR and (parent.parent / PROJECT_FILE).is_file():
        return parent.parent
    return project_or_cwd(None)


def _load(file: Path) -> Workflow:
    from storyloom.workflow.workflow_file import load_workflow_file

    try:
        return load_workflow_file(file)
    except FileFormatError as exc:
        raise fail(exc) from None


def _problem_line(problem: WorkflowProblem) -> str:
    where = ".".join(p for p in (problem.node_id, problem.slot or problem.field) if p)
    return f"  [{problem.code}] {where + ': ' if where else ''}{problem.message}"


def _invalid(file: Path, problems: list[WorkflowProblem]) -> typer.Exit:
    typer.echo(f"storyloom: {file}: {len(problems)} problem(s):", err=True)
    for problem in problems:
        typer.echo(_problem_line(problem), err=True)
    return typer.Exit(1)


def _parse_inputs(workflow: Workflow, raw: list[str]) -> dict[str, Any]:
    """``name=value`` pairs typed by the interface; every bad one is reported at once."""
    from storyloom.workflow.slot_types import parse_value

    known = workflow.interface_inputs
    values: dict[str, Any] = {}
    problems: list[FieldProblem] = []
    for item in raw:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            problems.append(FieldProblem(item, "expected name=value"))
            continue
        slot = known.get(name)
        if slot is None:
            names = ", ".join(known) or "none: it has no interfaceInputs"
            problems.append(FieldProblem(name, f"not an input of this workflow (inputs: {names})"))
            continue
        try:
            values[name] = parse_value(text, slot.data_flow_type)
        except ValueError as exc:
            problems.append(FieldProblem(name, str(exc)))
    given = {p.field for p in problems}
    for name, slot in known.items():
        missing = name not in values and name not in given
        if slot.required and missing and slot.config.default is None:
            problems.append(FieldProblem(name, f"required: pass --input {name}=..."))
    if problems:
        typer.echo("storyloom: bad --input:", err=True)
        for problem in problems:
            typer.echo(f"  {problem}", err=True)
        raise typer.Exit(1)
    return values


class _StreamPrinter:
    """Streamed text on stdout as it comes, under a header line whenever the streaming
    node changes (branches may stream at the same time)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.current: str | None = None
        self.streamed: set[str] = set()

    def __call__(self, event: RunEvent) -> None:
        from storyloom.workflow.events import NodeCompleted, NodeError, NodeStarted, NodeStreaming

        if isinstance(event, NodeStarted):
            self.names[event.node_id] = event.node_type
        elif isinstance(event, NodeStreaming):
            if self.current != event.node_id:
                self._end_line()
                node_type = self.names.get(event.node_id, "")
                typer.echo(f"--- {event.node_id} ({node_type}) ---")
                self.current = event.node_id
                self.streamed.add(event.node_id)
            sys.stdout.write(event.chunk)
            sys.stdout.flush()
        elif isinstance(event, NodeCompleted | NodeError) and event.node_id == self.current:
            self._end_line()
        if isinstance(event, NodeError):
            typer.echo(f"storyloom: node {event.node_id!r} failed: {event.error}", err=True)

    def _end_line(self) -> None:
        if self.current is not None:
            typer.echo("")
            self.current = None


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value), ensure_ascii=False, indent=2)


def _print_outputs(workflow: Workflow, result: RunResult) -> None:
    if workflow.interface_outputs:
        for name in workflow.interface_outputs:
            if name in result.interface_outputs:
                typer.echo(f"=== {name} ===")
                typer.echo(_show(result.interface_outputs[name]))
        return
    # Without an interface, what the run was for is the nodes whose outputs go nowhere.
    feeding = {edge.source for edge in workflow.edges}
    for node_id, outputs in result.outputs.items():
        if node_id in feeding:
            continue
        for slot, value in outputs.items():
            typer.echo(f"=== {node_id}.{slot} ===")
            typer.echo(_show(value))


@workflow_app.command("run")
def run(
    file: FileArgument,
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            help="An interface input as name=value (repeatable); typed by its dataFlowType.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    project: ProjectOption = None,
    home: HomeOption = None,
) -> None:
    """Run a workflow and print its outputs (and streamed text as it comes).

    The run goes through the same tool host as the server's: enabled plugins' node types
    and hooks apply, and ``agent:Run`` calls tools under the global tool policy."""
    from storyloom.core.home import ensure_home, resolve_home
    from storyloom.core.settings import SettingsStore
    from storyloom.plugins import default_registry
    from storyloom.tools.tool_host import open_tool_host
    from storyloom.workflow.validation import WorkflowInvalid

    workflow = _load(file)
    values = _parse_inputs(workflow, inputs or [])
    data_dir = ensure_home(resolve_home(home))
    loaded = SettingsStore(data_dir).load()
    if loaded.error:
        typer.echo(f"storyloom: {loaded.error}\n  defaults are in use", err=True)
    host = open_tool_host(
        data_dir, _workflow_project(project, file), node_registry=default_registry()
    )

    def refuse(approval: PendingApproval) -> None:
        # Nobody can answer an approval in a command-line run; waiting would hang it.
        typer.echo(
            f"storyloom: {approval.tool} needs approval (policy ask); refused in the command line",
            err=True,
        )
        host.approvals.answer(approval.id, "deny")

    host.approvals.on_request = refuse

    async def run_and_close() -> RunResult:
        on_event = None if as_json else _StreamPrinter()
        try:
            await host.start()
            return await host.runner.run(workflow, inputs=values, on_event=on_event)
        finally:
            await host.aclose()
            if host.knowledge is not None:
                await host.knowledge.aclose()

    try:
        result = asyncio.run(run_and_close())
    except WorkflowInvalid as exc:
        raise _invalid(file, exc.problems) from None
    except StoryloomError as exc:
        raise fail(exc) from None
    finally:
        host.database.close()
    if as_json:
        report = {
            "runId": result.run_id,
            "status": result.status,
            "interfaceOutputs": result.interface_outputs,
            "outputs": result.outputs,
            "errors": result.errors,
        }
        typer.echo(json.dumps(to_jsonable_python(report), ensure_ascii=False, indent=2))
    else:
        _print_outputs(workflow, result)
        if result.status != "completed":
            typer.echo(f"storyloom: the run {result.status}", err=True)
    if result.status != "completed":
        raise typer.Exit(1)


@workflow_app.command("validate")
def validate(
    file: FileArgument, as_json: JsonOption = False, project: ProjectOption = None
) -> None:
    """Check a workflow file and list every problem, each with its node and slot."""
    from storyloom.plugins import default_registry
    from storyloom.workflow.validation import validate_workflow
    from storyloom.workflow.workflow_file import WorkflowLibrary, load_workflow_file

    try:
        workflow = load_workflow_file(file)
    except FileFormatError as exc:
        if not as_json:
            raise fail(exc) from None
        fields = [{"field": p.field, "message": p.reason} for p in exc.problems]
        typer.echo(json.dumps({"file": str(file), "valid": False, "problems": fields}, indent=2))
        raise typer.Exit(1) from None
    root = _workflow_project(project, file)
    loader = WorkflowLibrary(root).load if root is not None else None
    problems = validate_workflow(workflow, default_registry(), loader)
    if as_json:
        report = {
            "file": str(file),
            "valid": not problems,
            "problems": [p.model_dump(by_alias=True) for p in problems],
        }
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
    elif problems:
        raise _invalid(file, problems)
    else:
        typer.echo(f"{file}: valid ({len(workflow.nodes)} nodes, {len(workflow.edges)} edges)")
    if problems:
        raise typer.Exit(1)


@workflow_app.command("nodes")
def nodes(as_json: JsonOption = False) -> None:
    """List the node types (built-in and from installed plugins), by category."""
    from storyloom.plugins import default_registry

    infos = default_registry().infos()
    if as_json:
        data = [info.model_dump(mode="json", by_alias=True) for info in infos]
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    for category in sorted({info.category for info in infos}):
        typer.echo(category)
        for info in (i for i in infos if i.category == category):
            ins = ", ".join(f"{s.name}:{s.type}" for s in info.inputs)
            outs = ", ".join(f"{s.name}:{s.type}" for s in info.outputs)
            typer.echo(f"  {info.type}  {info.display_name}: {info.description}")
            if ins or outs:
                typer.echo(f"      ({ins}) -> ({outs})")


@workflow_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of workflow files."""
    from storyloom.plugins import default_registry

    data = default_registry().workflow_schema()
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
