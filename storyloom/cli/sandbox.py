"""``storyloom sandbox check``: can this machine run sandboxed code, and if not, why.

Plugin script tools and the CodeInterpreter only ever run inside the bubblewrap sandbox;
where it cannot be made they are unavailable. This command probes it the way a run
does, then runs one trivial sandboxed Python program end to end, and prints what it
found with the fix when something is missing. Exit code 1 when the sandbox is unavailable.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import typer

from storyloom.cli.options import JsonOption, run_async

sandbox_app = typer.Typer(
    help="The sandbox plugin script tools and the CodeInterpreter run in.",
    no_args_is_help=True,
)


@sandbox_app.command("check")
def check(as_json: JsonOption = False) -> None:
    """Probe the sandbox and run a trivial program in it; exit 1 when it is unavailable."""
    from storyloom.sandbox import (
        SandboxRequest,
        SandboxUnavailable,
        python_argv,
        run_sandboxed,
        sandbox_status,
    )

    status = sandbox_status()
    report: dict[str, Any] = asdict(status)
    if status.available:
        try:
            trial = run_async(
                run_sandboxed(SandboxRequest(python_argv("-c", "print('ok')"), name="check"))
            )
        except SandboxUnavailable as exc:
            report.update(
                available=False,
                reason=str(exc),
                fix="",
                process_limit="none",
                memory_limit="none",
                seccomp=False,
            )
        else:
            report["trial"] = {
                "result": trial.describe(),
                "stdout": trial.stdout.strip(),
                "duration_ms": round(trial.duration_ms, 1),
            }
            if trial.stdout.strip() != "ok":
                report.update(
                    available=False,
                    reason=f"a trial program did not run: {trial.describe()} {trial.stderr}",
                    fix="",
                )
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    elif report["available"]:
        typer.echo(f"sandbox: available (bwrap {report['bwrap']})")
        typer.echo(
            "seccomp filter: active (keyrings, io_uring, bpf, memfd, SysV shm and more refused)"
        )
        typer.echo(f"process limit: {_process_limit_words(report['process_limit'])}")
        typer.echo(f"memory limit: {_memory_limit_words(report['memory_limit'])}")
        trial_info = report["trial"]
        typer.echo(
            f"trial: python printed {trial_info['stdout']!r}, {trial_info['result']}, "
            f"{trial_info['duration_ms']} ms"
        )
    else:
        typer.echo(f"sandbox: UNAVAILABLE: {report['reason']}")
        if report["fix"]:
            typer.echo(f"fix: {report['fix']}")
        typer.echo("plugin script tools and the CodeInterpreter cannot run until this is fixed")
    if not report["available"]:
        raise typer.Exit(1)


def _memory_limit_words(kind: str) -> str:
    return {
        "cgroup": "the whole run, by a memory cgroup per run (and RLIMIT_AS/DATA per process)",
        "rlimit": "per process only, by RLIMIT_AS/DATA (no memory cgroup can be made here)",
    }.get(kind, "none")


def _process_limit_words(kind: str) -> str:
    return {
        "rlimit": "RLIMIT_NPROC in the sandbox's user namespace",
        "cgroup": "a pids cgroup per run (storyloom runs as root)",
    }.get(kind, "none")
