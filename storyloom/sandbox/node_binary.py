"""The host's Node.js as a sandbox runs it: found on the host's ``PATH``, its real file
bound read-only at its own path when it lies outside the system folders every sandbox
binds (``/usr/local/bin/node -> /opt/node/bin/node`` binds ``/opt/node/bin/node``).

Script tools (``command: node ...``) and the CodeInterpreter's ``nodejs`` language both
run it; neither bundles a Node of its own.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from storyloom.sandbox.bwrap import in_system_dirs
from storyloom.sandbox.process_sandbox import Mount

NODE_COMMAND = "node"


@dataclass(frozen=True)
class NodeBinary:
    """Where node is inside the sandbox, and the mounts that put it there."""

    path: str
    mounts: tuple[Mount, ...]


class NodeMissing(LookupError):
    """No ``node`` on the host's ``PATH``; the message says where it was looked for."""


def find_node() -> NodeBinary:
    """The host's node, ready to bind; :class:`NodeMissing` when there is none."""
    found = shutil.which(NODE_COMMAND)
    if found is None:
        searched = os.environ.get("PATH") or os.defpath
        raise NodeMissing(f"command 'node' is not installed (looked in {searched})")
    real = Path(found).resolve()
    mounts: tuple[Mount, ...] = ()
    if not in_system_dirs(str(real)):  # else the sandbox binds it anyway
        mounts = (Mount(host=real, inside=str(real)),)
    return NodeBinary(str(real), mounts)
