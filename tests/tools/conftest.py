"""Every tool test: the plugin hosts it opened are closed after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tools.plugin_support import HOSTS


@pytest.fixture(autouse=True)
def close_plugin_hosts() -> Iterator[None]:
    yield
    while HOSTS:
        HOSTS.pop().close()
