"""The pluggy markers of storyloom's hooks, shared by every layer that declares hooks.

A plugin module marks its functions with :data:`hookimpl`; each layer declares the hooks
it calls in its own ``hookspecs`` module with :data:`hookspec`.
"""

from __future__ import annotations

import pluggy

PROJECT = "storyloom"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
