"""Sandboxed execution: untrusted programs and scripts run isolated and within limits.

A low layer beside ``llm`` and ``store``: it imports only ``storyloom.core``. Programs
(plugin script tools, the CodeInterpreter) run in a bubblewrap sandbox through
:func:`run_sandboxed` (a long-lived one, the script worker, through
:func:`start_sandboxed`); the names below are the public API.
"""

from storyloom.sandbox.bwrap import (
    SandboxStatus,
    SandboxUnavailable,
    require_sandbox,
    sandbox_status,
)
from storyloom.sandbox.limits import LimitName, SandboxLimits
from storyloom.sandbox.process_sandbox import (
    PYTHON_INSIDE,
    Mount,
    SandboxedProcess,
    SandboxRequest,
    SandboxResult,
    python_argv,
    run_sandboxed,
    start_sandboxed,
)

__all__ = [
    "PYTHON_INSIDE",
    "LimitName",
    "Mount",
    "SandboxLimits",
    "SandboxRequest",
    "SandboxResult",
    "SandboxStatus",
    "SandboxUnavailable",
    "SandboxedProcess",
    "python_argv",
    "require_sandbox",
    "run_sandboxed",
    "sandbox_status",
    "start_sandboxed",
]
