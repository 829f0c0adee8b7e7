"""What a sandboxed run may use, and the names of the limits that can stop it.

The limits are one frozen value so a caller (a tool, the CodeInterpreter) can keep its
own defaults and pass them along unchanged; each field says which mechanism enforces it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

LimitName = Literal["wall_time", "cpu_time", "memory", "output", "file_size"]
"""Which limit stopped a run; ``SandboxResult.limit`` holds one of these or ``None``.

The process limit has no name here: past it ``fork`` fails (EAGAIN) inside the sandbox
and the program sees that error itself, so it is never what "stopped" a run.
"""


class SandboxLimits(BaseModel):
    """The resources one sandboxed run may use.

    ``memory_mb`` is RLIMIT_AS for the sandbox's Python (an address-space limit is exact
    there) and RLIMIT_DATA for any other program: V8 and other JITs reserve large
    address ranges they never touch, which RLIMIT_AS would count and refuse.
    ``processes`` is RLIMIT_NPROC set inside the sandbox's own user namespace, or, when
    storyloom runs as root (where the kernel ignores RLIMIT_NPROC), a pids cgroup.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_seconds: float = Field(default=10.0, gt=0)
    """Wall clock; past it the whole process tree is killed."""
    cpu_seconds: int = Field(default=10, ge=1)
    """RLIMIT_CPU of each process."""
    memory_mb: int = Field(default=512, ge=16)
    """RLIMIT_AS for a Python target, RLIMIT_DATA otherwise."""
    processes: int = Field(default=32, ge=2)
    """Processes (and threads) the run may have at once."""
    file_size_mb: int = Field(default=16, ge=1)
    """RLIMIT_FSIZE: the largest file a process may write."""
    scratch_mb: int = Field(default=64, ge=1)
    """Size of the tmpfs mounted at ``/scratch`` (the working directory by default)."""
    output_kb: int = Field(default=1024, ge=1)
    """Cap on stdout and on stderr, each; past it the run is killed."""
    open_files: int = Field(default=256, ge=16)
    """RLIMIT_NOFILE."""
